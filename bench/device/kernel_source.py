"""The source of the Triton kernels Inductor generates for a frozen model, those whose code matches ``--match``: to
read what a kernel that takes time computes (which inputs it loads, what it recomputes, its launch config).

    python bench/device/kernel_source.py --models "hf:qwen2,num_hidden_layers=8" --batch 8 --seq-len 512 \\
        --match "sin|cos" --out $OUT/rotary.json
"""

from __future__ import annotations

import re
from typing import Any

import torch

from per_model import first, frozen_rows, parser, write  # bench/device/per_model.py, beside this script

KERNEL = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)', '''(.*?)'''", re.S | re.M)


def one_model(model: str, args: Any) -> dict[str, Any]:
    from torch._inductor.utils import run_and_get_code

    from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

    spec = WorkloadSpec(
        model,
        device="cuda",
        dtype=args.dtype,
        batch=args.batch,
        channels_last=True,
        seq_len=args.seq_len,
        mode=args.mode,
    )
    m, x = build_model(spec).eval(), make_inputs(spec, 1)[0]
    with torch.no_grad():
        _, codes = run_and_get_code(lambda: first(torch.compile(m)(x)))
    kernels = {name: src for code in codes for name, _, src in KERNEL.findall(code)}
    calls = {name: sum(code.count(f"{name}.run(") for code in codes) for name in kernels}
    matched = {n: src for n, src in kernels.items() if re.search(args.match, src)}
    print(model, len(kernels), "kernels;", len(matched), "match:", list(matched), flush=True)
    return {"model": model, "kernels": len(kernels), "calls": {n: calls[n] for n in matched}, "source": matched}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--match", required=True, help="a regular expression a kernel's source must hold")
    args = p.parse_args()
    write(args, "kernel_source.py", frozen_rows(args, one_model))


if __name__ == "__main__":
    main()
