"""Does cuDNN's own epilogue (bias, residual add, ReLU fused into the convolution) beat Inductor's separate Triton
kernel after it, for a frozen CNN under CUDA graphs?

Each model is compiled frozen under CUDA graphs twice: Inductor's defaults, and the same with tuner's rewrite of
``relu(conv(x, w, b) [+ z])`` into ``cudnn_convolution_[add_]relu`` (``backend/hooks/conv_epilogue.py``) as the
post-grad pass. Calls are timed interleaved with CUDA events (medians of rounds); outputs are checked against eager.

    python bench/device/conv_epilogue.py --models "resnet50;resnext50_32x4d" --dtype bf16 --batch 32 --out $OUT/e.json
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import torch

from tuner.backend.hooks import conv_epilogue
from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

from per_model import first, frozen_rows, interleaved_ms, parser, write  # bench/device/per_model.py, beside this script


class Counting(conv_epilogue.FuseEpilogues):
    fused = 0

    def __call__(self, graph: Any) -> None:
        Counting.fused += conv_epilogue.fuse(graph)


VARIANTS = {"default": {}, "cudnn-epilogue": {"post_grad_custom_pre_pass": Counting()}}


def one_model(model: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = WorkloadSpec(model, device="cuda", dtype=args.dtype, batch=args.batch, channels_last=True)
    m, x = build_model(spec).eval(), make_inputs(spec, 1)[0]
    fns, outs = {}, {}
    with torch.no_grad():
        ref = first(m(x)).float()
        for name, opts in VARIANTS.items():
            torch._dynamo.reset()
            Counting.fused = 0
            fns[name] = torch.compile(m, options={"triton.cudagraphs": True, **opts})
            for _ in range(5):
                outs[name] = first(fns[name](x)).float().clone()
        times = interleaved_ms({name: (lambda f=fns[name]: f(x)) for name in VARIANTS}, args.rounds, 50)
    base = statistics.median(times["default"])
    row = {"model": model, "fused": Counting.fused, "ms": {n: statistics.median(t) for n, t in times.items()}}
    row["over_default"] = {n: ms / base for n, ms in row["ms"].items()}
    row["max_abs_diff_vs_eager"] = {n: float((o - ref).abs().max()) for n, o in outs.items()}
    print(row, flush=True)
    return row


def main() -> None:
    args = parser(__doc__).parse_args()
    write(args, "conv_epilogue.py", frozen_rows(args, one_model))


if __name__ == "__main__":
    main()
