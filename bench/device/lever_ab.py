"""Does a lever beat Inductor's own compile of a frozen model under CUDA graphs: one of tuner's graph rewrites, or an
Inductor option that max-autotune leaves as it is?

Each model is compiled frozen (a decode step unfrozen) under CUDA graphs once per variant: Inductor's defaults; each
``--rewrite`` (a knob of ``backend/hooks/rewrites.REWRITES``: ``cudnn_epilogue``, cuDNN's own epilogue for
``relu(conv(x, w, b) [+ z])``; ``merge_gemms``, the GEMMs that read one input through frozen weights as one;
``space_to_depth``, the stem; ``compute_once``, broadcast cos and sin stored once) as the post-grad pass; each
``--option key=value`` (an Inductor config, the value as JSON: ``triton.enable_pdl=true``); and, where there are
several, all of them together. ``--base-option`` sets an option in every variant, the default's too. Calls are timed
interleaved with CUDA events (medians of rounds); outputs are checked against eager; ``nodes_removed`` says how much
the rewrites changed the graphs (negative: nodes added).

    python bench/device/lever_ab.py --rewrite cudnn_epilogue --models "resnet50;resnext50_32x4d" --out $OUT/e.json
    python bench/device/lever_ab.py --rewrite merge_gemms --option triton.enable_pdl=true \\
        --models "hf:qwen2,num_hidden_layers=8" --batch 8 --seq-len 512 --out $OUT/m.json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tuner.backend.hooks.custom_pass import Base
from tuner.backend.hooks.rewrites import REWRITES, Rewrites

from per_model import frozen_rows, parser, variants_row, write  # bench/device/per_model.py, beside this script


class Counting(Base):  # type: ignore[misc,valid-type]
    """Rewrite passes, counting the graph nodes they remove."""

    def __init__(self, rewrites: list[str]) -> None:
        self.inner, self.removed = Rewrites([REWRITES[r]() for r in rewrites]), 0

    def __call__(self, graph: Any) -> None:
        before = len(graph.nodes)
        self.inner(graph)
        self.removed += before - len(graph.nodes)

    def uuid(self) -> Any:
        return self.inner.uuid()


def variants(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """{name: Inductor options}: the defaults, each lever alone, then all of them together (where no option is given
    twice: one option with several values, e.g. ``triton.multi_kernel=2`` and ``=3``, is a variant per value)."""
    pairs = [_option(o) for o in args.option]
    options = dict(pairs)
    levers = {r: {"post_grad_custom_pre_pass": Counting([r])} for r in args.rewrite}
    levers |= {f"{k}={json.dumps(v)}": {k: v} for k, v in pairs}
    together = (
        {}
        if len(options) < len(pairs)
        else {"all": {**options, **({"post_grad_custom_pre_pass": Counting(args.rewrite)} if args.rewrite else {})}}
    )
    base = dict(_option(o) for o in args.base_option)
    return {n: {**base, **o} for n, o in {"default": {}, **levers, **(together if len(levers) > 1 else {})}.items()}


def _option(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    return key, json.loads(value)


def one_model(model: str, args: argparse.Namespace) -> dict[str, Any]:
    each = variants(args)
    row, outs, eager = variants_row(model, args, each)
    row["nodes_removed"] = {
        n: opts["post_grad_custom_pre_pass"].removed for n, opts in each.items() if "post_grad_custom_pre_pass" in opts
    }
    row["max_abs_diff_vs_eager"] = {n: float((o - eager).abs().max()) for n, o in outs.items()}
    print(row, flush=True)
    return row


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--rewrite", action="append", default=[], choices=sorted(REWRITES))
    p.add_argument(
        "--option",
        action="append",
        default=[],
        help="an Inductor option as key=JSON value, e.g. triton.enable_pdl=true",
    )
    p.add_argument(
        "--base-option",
        action="append",
        default=[],
        help="an Inductor option every variant takes, the default "
        "included (max_autotune=true: each lever on top of max-autotune's choices)",
    )
    args = p.parse_args()
    if not args.rewrite and not args.option:
        p.error("give at least one --rewrite or --option")
    write(args, "lever_ab.py", frozen_rows(args, one_model))


if __name__ == "__main__":
    main()
