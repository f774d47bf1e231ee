"""Which configs of tuner's decode attention kernel beat cuDNN's and flash's at decode-step attention sites? One short
device call, no compile of a model.

Each site (batch, query heads, key heads, queries, head size, keys; bf16, no mask) is rebuilt as
``backend/instrument/attention_timing`` rebuilds a sweep's sites; cuDNN's and flash's fused ops and the decode kernel
(``tuner.backend.decode_attention``) over a grid of splits, key steps and warps (and, where heads group, one query
head a program) are timed there as CUDA graphs of calls over copies past the L2, each checked against math attention
in float32 first. The row says the kernel's own pick (``split_for``) beside the best config, so the heuristic can be
set from what the card measured. Writes ``$OUT/decode-attention-sites.json`` with provenance. CUDA only.

    python bench/device/decode_attention_sites.py [--site NAME=B,H,HK,SQ,D,SK] ... [--out decode-attention-sites.json]
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import sites_alone

# gpt2's decode step (8 sequences, 512 cached positions); an OPT-350m-sized one (16 heads, 1024); a Llama-style one
# with grouped heads and a long cache (32 query heads over 8, head 128, 4096 positions); one sequence over 8192.
SITES = ["gpt2=8,12,12,1,64,512", "opt-350m=8,16,16,1,64,1024", "llama-gqa=8,32,8,1,128,4096", "long=1,32,8,1,128,8192"]
# Configs timed at a site: splits around the kernel's own pick, keys a step, warps.
SPLITS, BLOCK_NS, WARPS_TIMED = (0.5, 1, 2), (32, 64, 128), (2, 4)
TOLERANCE = 4e-2  # bf16 against a float32 reference, relative to its largest value (``ALONE_TOLERANCE``)


def _inputs(b: int, h: int, hk: int, sq: int, d: int, sk: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator("cuda").manual_seed(0)
    q = torch.randn(b, sq, h, d, generator=gen, device="cuda").to(torch.bfloat16).transpose(1, 2)
    k, v = (torch.randn(b, hk, sk, d, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(2))
    return {"q": q, "k": k, "v": v, "mask": None, "causal": False, "scale": None}


def _configs(pick: int) -> list[dict[str, Any]]:
    """The grid at a site whose kernel picks ``pick`` splits."""
    from tuner.backend.decode_attention import MAX_SPLIT

    splits = sorted({max(1, min(MAX_SPLIT, int(pick * f))) for f in SPLITS})
    return [{"split": s, "block_n": n, "warps": w} for s, n, w in itertools.product(splits, BLOCK_NS, WARPS_TIMED)]


def _runs(a: dict[str, Any], pick: int) -> dict[str, Any]:
    """{name: make(q, k, v) -> call}: the fused ops, handed the grouped heads as they are (SDPA's ``enable_gqa``,
    where the op reads them so) and, where heads group, the keys repeated for each query head too (as a model that
    repeats them before SDPA hands them over; the repeat itself untimed), and each config of the decode kernel."""
    from tuner.backend.decode_attention import decode_attention
    from tuner.backend.hooks.attention import call

    def fused(backend: str, repeat: bool, q: Any, k: Any, v: Any) -> Any:
        g = q.shape[1] // k.shape[1]
        k, v = (t.repeat_interleave(g, 1) if repeat else t for t in (k, v))
        op, args, kwargs = call(backend, {**a, "q": q, "k": k, "v": v})
        return lambda: op(*args, **kwargs)[0]

    g = a["q"].shape[1] // a["k"].shape[1]
    out = {b: functools.partial(fused, b, False) for b in ("cudnn", "flash")}
    out.update({f"{b}, keys repeated": functools.partial(fused, b, True) for b in ("cudnn", "flash") if g > 1})
    out["decode (its own pick)"] = lambda q, k, v: lambda: decode_attention(q, k, v)
    if g > 1:
        out["decode (its own pick, one query head a program)"] = lambda q, k, v: (
            lambda: decode_attention(q, k, v, grouped=False)
        )
    for c in _configs(pick):
        out["decode " + " ".join(f"{n}={x}" for n, x in c.items())] = lambda q, k, v, c=c: (
            lambda: decode_attention(q, k, v, **c)
        )
    return out


def time_site(spec: str) -> dict[str, Any]:
    """One site's row: each run's time (µs, median of rounds) or why it has none, the fastest, and the kernel's pick."""
    from tuner.backend.decode_attention import BLOCK_N, WARPS, split_for, tiles_for, _sms
    from tuner.backend.instrument.attention_timing import _reference, interleaved_graphs
    from tuner.backend.instrument.site_timing import _graph_of, rotated

    name, _, sizes = spec.partition("=")
    b, h, hk, sq, d, sk = (int(x) for x in sizes.split(","))
    a = _inputs(b, h, hk, sq, d, sk)
    pick = split_for(tiles_for(b, h, hk, sq), sk, _sms("cuda"))
    ref, row, graphs = _reference(a), {"site": name, "sizes": [b, h, hk, sq, d, sk]}, {}
    for run, make in _runs(a, pick).items():
        try:
            err = float((make(a["q"], a["k"], a["v"])().float() - ref).abs().max() / ref.abs().max())
            if not err <= TOLERANCE:
                row[run] = {"error": f"differs from math attention by {err:.3g}"}
                continue
            sets = rotated((a["q"], a["k"], a["v"]))
            graphs[run] = (_graph_of([functools.partial(make, *s) for s in sets]), len(sets))
        except Exception as e:  # noqa: BLE001 - a run this device or torch refuses gets no time
            row[run] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
    for run, t in interleaved_graphs(graphs).items():
        row[run] = {"us": round(t["ms"] * 1e3, 3), "spread_us": round(t["spread"] * 1e3, 3)}
    timed = {r: t["us"] for r, t in row.items() if isinstance(t, dict) and "us" in t}
    row["fastest"] = min(timed, key=timed.get) if timed else None
    row["pick"] = {"split": pick, "block_n": BLOCK_N, "warps": WARPS}
    print(
        name,
        {r: timed[r] for r in sorted(timed, key=timed.get)[:6]},
        "pick:",
        timed.get("decode (its own pick)"),
        flush=True,
    )
    return row


def main() -> None:
    args = sites_alone.parse_args(
        __doc__, "--site", "NAME=B,H,HK,SQ,D,SK (repeatable; default: SITES)", "decode-attention-sites.json"
    )
    rows: list[dict[str, Any]] = []
    for spec in args.site or SITES:
        rows.append(time_site(spec))
        sites_alone.write(args.out, rows)


if __name__ == "__main__":
    main()
