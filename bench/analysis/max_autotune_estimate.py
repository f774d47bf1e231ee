"""How close is the estimate of max-autotune's compile (``tuner/budget/estimate.py``) to the compiles benches measured?

For each stored `--budget default` sweep with a bench beside it: the template choices its sites listed (from the
export), its default compile and Triton kernel count (from the sweep's log) and max-autotune's compile as the bench
measured it (``freezing-max-autotune`` or ``max-autotune``, the longer). Prints the estimate and its error per
run, with the per-tile model and with one flat figure a choice. ``--fit``: over both cards' runs, refits the choice
terms on other features of the recorded sites (a fixed cost per GEMM site, its rows, its multiply-adds, K) by least
squares on the relative error, the default compile, kernel and render terms held, and prints each fit's worst error.

    python bench/analysis/max_autotune_estimate.py [--results bench/results/h200]   # or bench/results/h100
    python bench/analysis/max_autotune_estimate.py --fit
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
from pathlib import Path
from typing import Any

from tuner.budget import estimate


def _same(name: str) -> tuple[str, str, str]:
    """A run whose export, bench JSON and sweep log all carry ``name``."""
    return f"{name}.jsonl.gz", f"{name}.json", f"sweep-{name}.log"


# (export, bench JSON, sweep log) under each results folder: every pair of a --budget default sweep and its bench.
H200 = [
    _same("hf_gpt2-decode-bf16-b8-s512-default-2026-12-04"),
    _same("qwen2-8l-bf16-b8-s512-merge-gemms-2026-12-04"),
    (
        "qwen2-8l-default-2026-12-03-3.jsonl.gz",
        "qwen2-8l-bf16-b8-s512-2026-12-03-3.json",
        "sweep-qwen2-8l-bf16-b8-s512-default-2026-12-03-3.log",
    ),
    _same("vit_b_32-bf16-b32-default-2026-12-04-3"),
    _same("vit_b_32-bf16-b32-default-2026-12-04"),
    _same("vit_b_32-bf16-b32-default-2026-12-04-2"),
    _same("resnext50_32x4d-bf16-b32-default-2026-12-04"),
    _same("convnext_tiny-bf16-b32-default-2026-12-04"),
    _same("hf_gpt2-decode-bf16-b8-s512-2026-12-06"),
    _same("hf_bert-base-uncased-bf16-b8-s512-2026-12-06"),
    _same("hf_gpt2-decode-bf16-b8-s512-credit-2026-12-06"),
    _same("hf_gpt2-decode-bf16-b8-s512-2026-12-07"),
]
H100 = [
    _same("hf_gpt2-decode-bf16-b8-s512-attention-alone-2026-12-05"),
    _same("vit_b_32-bf16-b32-default-2026-12-05"),
    _same("vit_b_32-bf16-b32-freezing-first-2026-12-05"),
    _same("hf_qwen2-8l-bf16-b8-s512-2026-12-05"),
    _same("hf_qwen2-8l-bf16-b8-s512-2026-12-05-2"),
    _same("hf_gpt2-decode-bf16-b8-s512-epilogue-credit-2026-12-05"),
    _same("hf_gpt2-decode-bf16-b8-s512-epilogue-credit-2026-12-05-2"),
    _same("hf_gpt2-decode-bf16-b8-s512-render-trim-2026-12-05-2"),
    _same("hf_qwen2-8l-bf16-b8-s512-render-trim-2026-12-05"),
    _same("hf_gpt2-decode-bf16-b8-s512-split-k-2026-12-05"),  # its log's renders still count the split-K choices
    _same("hf_gpt2-decode-bf16-b8-s512-2026-12-06"),
    _same("hf_qwen2-8l-bf16-b8-s512-2026-12-06"),
    _same("mobilenet_v3_large-bf16-b32-default-2026-12-06-2"),
    _same("hf_bert-base-uncased-bf16-b8-s512-fused-attention-2026-12-06"),
    _same("hf_bert-base-uncased-bf16-b8-s512-math-attention-2026-12-06"),
    _same("hf_gpt2-bf16-b8-s512-2026-12-06"),
    _same("hf_gpt2-decode-bf16-b8-s512-decode-attention-2026-12-07"),
    _same("hf_gpt2-decode-bf16-b8-s512-2026-12-07"),
    _same("hf_gpt2-decode-bf16-b8-s512-floor-capped-2026-12-07"),
    _same("hf_qwen2-8l-bf16-b8-s512-2026-12-07"),
    _same("hf_opt-24l-h1024-decode-bf16-b8-s1024-2026-12-07"),
    _same("hf_gpt2-decode-bf16-b8-s512-2026-12-07-2"),
    _same("hf_llama-8l-h2048-gqa16-4-decode-bf16-b8-s2048-2026-12-07"),
]
RUNS = {"h200": H200, "h100": H100}
STAMP = re.compile(r"^\[ *[0-9.]+\] ", re.M)
COMPILE = re.compile(r"default compile ([0-9.]+) s")
KERNELS = re.compile(r"template choices(?:, rendered ([0-9]+) times at its sites,)? and ([0-9]+) Triton")


def choices(export: Path) -> list[str]:
    """The choices each template site of the export listed, as the sweep's capture recorded them."""
    sites = []
    with gzip.open(export, "rt") as f:
        for line in f:
            row = json.loads(line)
            if row.get("type") == "task" and row.get("kind") == "template_choice":
                sites.append({"choices": row["signature"]["space"]["choices"]})
    return estimate.max_autotune_choices(sites)


def measured_s(bench: dict[str, Any]) -> float:
    """max-autotune's compile: the longer of its modes' where the bench timed both (the second compile of a decode
    step, where freezing changes nothing, is found in the first one's cache: 0.018 s)."""
    results = bench["results"]
    return max(float(results[m]["compile_s"]) for m in ("freezing-max-autotune", "max-autotune") if m in results)


def row(folder: Path, export: str, bench: str, log: str) -> dict[str, Any]:
    text = " ".join(STAMP.sub("", (folder / log).read_text()).split())  # the lines without their timestamps
    found = KERNELS.search(text)
    default_s, renders, kernels = float(COMPILE.search(text).group(1)), int(found.group(1) or 0), int(found.group(2))  # type: ignore[union-attr]
    listed, real = choices(folder / export), measured_s(json.loads((folder / bench).read_text()))
    # A sweep's log names the renders where its default compile rendered only the choices it may pick; before, the
    # default compile rendered them all and its time holds them.
    tiled = estimate.max_autotune_s("cuda", default_s, listed, kernels, renders) or 0.0
    tuned = min(kernels, estimate.MAX_AUTOTUNE_KERNELS["cuda"])
    flat = (
        default_s
        + len(listed) * estimate.MAX_AUTOTUNE_CHOICE_S["cuda"]
        + tuned * estimate.MAX_AUTOTUNE_KERNEL_S["cuda"]
        + renders * estimate.MAX_AUTOTUNE_RENDER_S["cuda"]
    )
    return {
        "run": bench,
        "choices": len(listed),
        "renders": renders,
        "kernels": kernels,
        "default_compile_s": default_s,
        "measured_s": real,
        "estimate_s": round(tiled, 1),
        "error": round(tiled / real - 1, 3),
        "flat_estimate_s": round(flat, 1),
        "flat_error": round(flat / real - 1, 3),
    }


def features(export: Path) -> dict[str, float]:
    """Per run: GEMM sites, their choices' tiles (plain and weighted by the site's rows, multiply-adds and K), and
    the other choices, as max-autotune would list them at the sites the export recorded."""
    from tuner.core import InputRow

    out = dict.fromkeys(("gemm_sites", "tiles", "flat", "tiles_x_log_rows", "tiles_x_log_flops", "tiles_x_k"), 0.0)
    with gzip.open(export, "rt") as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") != "task" or r.get("kind") != "template_choice":
                continue
            sig = r["signature"]
            listed = estimate.max_autotune_choices([{"choices": sig["space"]["choices"]}])
            tiles = sum(t for c in listed if (t := estimate.tile_m(c)) is not None)
            out["flat"] += sum(1 for c in listed if estimate.tile_m(c) is None)
            if not tiles:
                continue
            sizes = [InputRow.parse(x).sizes for x in sig["inputs"]]
            m, k, n = sizes[-2][-2], sizes[-2][-1], sizes[-1][-1]
            out["gemm_sites"] += 1
            out["tiles"] += tiles
            out["tiles_x_log_rows"] += tiles * math.log2(max(2, m))
            out["tiles_x_log_flops"] += tiles * math.log2(max(2.0, 2 * m * k * n / 1e6))
            out["tiles_x_k"] += tiles * k / 1024
    return out


FITS = [
    ("gemm_sites", "tiles", "flat"),
    ("tiles", "flat"),
    ("tiles", "flat", "tiles_x_k"),
    ("flat", "tiles_x_log_rows"),
    ("flat", "tiles_x_log_flops"),
    ("gemm_sites", "flat", "tiles_x_log_flops"),
]


def fit() -> None:
    """Each feature set of :data:`FITS`, fit over every run of both cards; its figures and its errors."""
    import numpy as np

    runs = []
    for card, listed in RUNS.items():
        folder = Path("bench/results") / card
        for export, bench, log in listed:
            r = row(folder, export, bench, log)
            held = (
                r["default_compile_s"]
                + min(r["kernels"], estimate.MAX_AUTOTUNE_KERNELS["cuda"]) * estimate.MAX_AUTOTUNE_KERNEL_S["cuda"]
                + r["renders"] * estimate.MAX_AUTOTUNE_RENDER_S["cuda"]
            )
            runs.append((f"{card} {r['run']}", r["measured_s"], held, features(folder / export), r["error"]))
    real, held = np.array([x[1] for x in runs]), np.array([x[2] for x in runs])
    print(json.dumps({"model": "estimate.py as it is", "worst_error": round(max(abs(x[4]) for x in runs), 3)}))
    for names in FITS:
        x = np.array([[f[n] for n in names] for *_, f, _ in runs])
        w, *_ = np.linalg.lstsq(x / real[:, None], (real - held) / real, rcond=None)
        err = (held + x @ w) / real - 1
        print(
            json.dumps(
                {
                    "model": dict(zip(names, w.round(4).tolist())),
                    "worst_error": round(float(abs(err).max()), 3),
                    "errors": {name: round(float(e), 3) for (name, *_), e in zip(runs, err)},
                }
            )
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default="bench/results/h200")
    p.add_argument("--fit", action="store_true", help="refit the choice terms on other features over both cards' runs")
    args = p.parse_args()
    if args.fit:
        fit()
        return
    folder = Path(args.results)
    for r in (row(folder, *run) for run in RUNS[folder.name]):
        print(json.dumps(r))


if __name__ == "__main__":
    main()
