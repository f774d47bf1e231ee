"""Which fused attention kernel is fastest at an attention site, timed alone? One short device call, no compile.

Each site (batch, heads, query length, head size, key length; bf16 unless given) is rebuilt as random inputs and
every fused backend (flash, memory-efficient, cuDNN) is timed as a CUDA graph of calls over copies past the L2
(``tuner.backend.instrument.attention_timing``), after its output is checked against math attention. Writes
``$OUT/attention-sites.json`` with provenance. CUDA only.

    python bench/device/attention_sites.py [--site NAME=B,H,SQ,D,SK[,causal]] ... [--out attention-sites.json]
"""

from __future__ import annotations

import sites_alone

# Sites of the acceptance's workloads: gpt2's decode step (b8, 512-position cache), vit_b_32 b32 (50 tokens), an
# 8-layer Qwen2-style prefill (b8 x 512, 16 query heads of 128... as the GQA keys are expanded by then: 16), and
# vit_b_16 b32 (197 tokens).
SITES = [
    "gpt2-decode=8,12,1,64,512",
    "vit_b_32=32,12,50,64,50",
    "qwen2-prefill=8,16,512,128,512,causal",
    "vit_b_16=32,12,197,64,197",
]


def parse(text: str) -> tuple[str, dict]:
    name, _, sizes = text.partition("=")
    parts = sizes.split(",")
    causal = parts[-1] == "causal"
    shape = [int(x) for x in parts[:5]]
    return name, {"shape": shape, "dtype": "bfloat16", "causal": causal, "mask": False}


def main() -> None:
    args = sites_alone.parse_args(
        __doc__,
        "--site",
        "NAME=B,H,SQ,D,SK[,causal] (repeatable; default: the acceptance's sites)",
        "attention-sites.json",
    )
    from tuner.backend.instrument.attention_timing import time_backends

    rows = []
    for text in args.site or SITES:
        name, site = parse(text)
        got = time_backends(site, ["flash", "efficient", "cudnn"])
        rows.append({"site": name, **site, "backends": got})
        said = "  ".join(
            f"{b} {r['ms'] * 1e3:.2f} us" if "ms" in r else f"{b} -- ({r['error'][:60]})" for b, r in got.items()
        )
        print(f"{name:14} {site['shape']}  {said}")
    sites_alone.write(args.out, rows)


if __name__ == "__main__":
    main()
