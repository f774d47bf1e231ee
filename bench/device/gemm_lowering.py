"""Does lowering with ``max_autotune_gemm`` on, but Inductor's own (ATen) choice at every site, change a frozen step
under CUDA graphs?

Every compile ``tuned`` makes sets ``max_autotune_gemm`` so that template choices exist at the selection sites. That
flag changes more than the choices: a channels-last 1x1 convolution becomes a matrix multiply
(``kernel/conv.py``), GEMM outputs get fixed layouts, and the scheduler fuses around templates differently. Each model
is compiled frozen under CUDA graphs three ways: Inductor's defaults; ``max_autotune_gemm`` with ATen as the only
backend
(the lowering ``tuned`` starts from, with no template chosen); and ``conv_1x1_as_mm`` alone (only the 1x1 rewrite).
Calls are timed interleaved with CUDA events (medians of rounds), outputs checked against the defaults'.

    python bench/device/gemm_lowering.py --models "resnet50" --dtype bf16 --batch 32 --out $OUT/gemm-lowering.json
"""

from __future__ import annotations

import argparse
from typing import Any

from per_model import frozen_rows, parser, variants_row, write  # bench/device/per_model.py, beside this script

VARIANTS = {
    "default": {},
    "max-autotune-gemm-aten": {"max_autotune_gemm": True, "max_autotune_gemm_backends": "ATEN"},
    "conv-1x1-as-mm": {"conv_1x1_as_mm": True},
}


def one_model(model: str, args: argparse.Namespace) -> dict[str, Any]:
    row, outs, _ = variants_row(model, args, VARIANTS)
    row["max_abs_diff"] = {n: float((o - outs["default"]).abs().max()) for n, o in outs.items()}
    print(row, flush=True)
    return row


def main() -> None:
    args = parser(__doc__).parse_args()
    write(args, "gemm_lowering.py", frozen_rows(args, one_model))


if __name__ == "__main__":
    main()
