"""Do the library flags that Inductor leaves at torch's defaults make a frozen compiled step faster on the device?

cuDNN's benchmark mode (``torch.backends.cudnn.benchmark``: each convolution shape times cuDNN's algorithms at its
first call instead of taking cuDNN's heuristic pick) and cuBLASLt as the preferred BLAS library
(``torch.backends.cuda.preferred_blas_library``) act when a compiled graph's library calls run, not when Inductor
compiles it; freezing + max-autotune never sets either. Each model is compiled once (freezing, Inductor's default
mode); for each flag setting the compiled step is warmed under it and captured as a CUDA graph (the workload's own
launch path once CUDA graphs are kept), and the graphs' replays are timed interleaved with CUDA events (medians of
rounds), their outputs checked against the heuristic graph's.

    python bench/device/library_flags.py --models "resnet50;vit_b_32" --dtype bf16 --batch 32 --out $OUT/flags.json
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from typing import Any

import torch

from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

from per_model import (
    captured,
    first,
    frozen_rows,
    interleaved_ms,
    parser,
    write,
)  # bench/device/per_model.py, beside this script

SETTINGS = ("heuristic", "cudnn-benchmark", "cublaslt", "both")


@contextlib.contextmanager
def flags(setting: str):
    old_bench, old_blas = torch.backends.cudnn.benchmark, torch.backends.cuda.preferred_blas_library()
    torch.backends.cudnn.benchmark = setting in ("cudnn-benchmark", "both")
    torch.backends.cuda.preferred_blas_library("cublaslt" if setting in ("cublaslt", "both") else "cublas")
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = old_bench
        torch.backends.cuda.preferred_blas_library(old_blas)


def one_model(model: str, args: argparse.Namespace) -> dict[str, Any]:
    cl = not model.startswith("hf:")
    spec = WorkloadSpec(
        model, device="cuda", dtype=args.dtype, batch=args.batch, seq_len=args.seq_len, channels_last=cl
    )
    m, x = build_model(spec).eval(), make_inputs(spec, 1)[0]
    fn = torch.compile(m)
    graphs, outs = {}, {}
    with torch.no_grad():
        for s in SETTINGS:
            with flags(s):
                graphs[s], outs[s] = captured(fn, x)
    ref = first(outs["heuristic"]).float()
    samples = interleaved_ms({s: graphs[s].replay for s in SETTINGS}, args.rounds, args.replays)
    row = {"model": model, "channels_last": cl}
    for s in SETTINGS:
        err = (first(outs[s]).float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-9)
        row[s] = {"median_ms": statistics.median(samples[s]), "min_ms": min(samples[s]), "max_rel_err": err}
    print(model, {s: round(row[s]["median_ms"], 4) for s in SETTINGS}, flush=True)
    return row


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--replays", type=int, default=20)
    args = p.parse_args()
    write(args, "library_flags.py", frozen_rows(args, one_model), cudnn=torch.backends.cudnn.version())


if __name__ == "__main__":
    main()
