"""Does cuDNN's own epilogue (bias, residual add, ReLU fused into the convolution) beat Inductor's separate Triton
kernel after it, for a frozen CNN under CUDA graphs?

Each model is compiled frozen under CUDA graphs twice: Inductor's defaults, and the same with tuner's rewrite of
``relu(conv(x, w, b) [+ z])`` into ``cudnn_convolution_[add_]relu`` (``backend/hooks/conv_epilogue.py``) as the
post-grad pass. Calls are timed interleaved with CUDA events (medians of rounds); outputs are checked against eager.

    python bench/device/conv_epilogue.py --models "resnet50;resnext50_32x4d" --dtype bf16 --batch 32 --out $OUT/e.json
"""

from __future__ import annotations

import argparse
from typing import Any

from tuner.backend.hooks import conv_epilogue

from per_model import frozen_rows, parser, variants_row, write  # bench/device/per_model.py, beside this script


class Counting(conv_epilogue.FuseEpilogues):
    fused = 0

    def __call__(self, graph: Any) -> None:
        Counting.fused += conv_epilogue.fuse(graph)


VARIANTS = {"default": {}, "cudnn-epilogue": {"post_grad_custom_pre_pass": Counting()}}


def one_model(model: str, args: argparse.Namespace) -> dict[str, Any]:
    row, outs, eager = variants_row(model, args, VARIANTS, lambda name: setattr(Counting, "fused", 0))
    row["fused"] = Counting.fused  # by the last variant's compile, the rewrite's
    row["max_abs_diff_vs_eager"] = {n: float((o - eager).abs().max()) for n, o in outs.items()}
    print(row, flush=True)
    return row


def main() -> None:
    args = parser(__doc__).parse_args()
    write(args, "conv_epilogue.py", frozen_rows(args, one_model))


if __name__ == "__main__":
    main()
