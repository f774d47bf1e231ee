"""The graph rewrites the fusion groupings can turn on, in Inductor's one post-grad pre-pass slot: the space-to-depth
stem (``conv_rewrite``), cuDNN's convolution epilogue (``conv_epilogue``), merged GEMMs (``gemm_merge``) and broadcast
values computed once (``compute_once``). Each is a knob of the fusion space (``search_spaces/fusion.REWRITE_KNOBS``,
where it is offered and what the sweep says of it); here, its pass and its finder. :func:`patches` turns the knobs
that are on into the pass; :func:`found_in` is what the recording keeps of where each applies.

A new rewrite: its module here (the pass and a finder), a row in each table below and in ``REWRITE_KNOBS``, and its
expected gain in ``tuner/budget/gain.py``."""

from __future__ import annotations

from typing import Any

from tuner.backend.hooks import compute_once, conv_epilogue, conv_rewrite, gemm_merge
from tuner.backend.hooks.conv_rewrite import SpaceToDepth
from tuner.backend.hooks.custom_pass import Base, placed
from tuner.search_spaces.fusion import COMPUTE_ONCE, CONV_EPILOGUE, MERGE_GEMMS, SPACE_TO_DEPTH

# Each rewrite knob with its pass, in the order they run (``REWRITE_KNOBS``'s)
REWRITES = {
    SPACE_TO_DEPTH: SpaceToDepth,
    CONV_EPILOGUE: conv_epilogue.FuseEpilogues,
    MERGE_GEMMS: gemm_merge.MergeGemms,
    COMPUTE_ONCE: compute_once.ComputeOnce,
}
# ... and its finder: where in a graph about to be lowered it applies, as a count or a list (one entry a place)
FINDERS = {
    SPACE_TO_DEPTH: conv_rewrite.eligible_shapes,
    CONV_EPILOGUE: conv_epilogue.eligible,
    MERGE_GEMMS: gemm_merge.eligible_dims,
    COMPUTE_ONCE: compute_once.eligible_ops,
}


def found_in(gm: Any) -> dict[str, Any]:
    """What each rewrite's finder found in ``gm``, by knob."""
    return {knob: find(gm) for knob, find in FINDERS.items()}


class Rewrites(Base):  # type: ignore[misc,valid-type]
    """Several rewrites in the one pre-pass slot, run in order."""

    def __init__(self, passes: list[Any]) -> None:
        self.passes = passes

    def __call__(self, graph: Any) -> None:
        for p in self.passes:
            p(graph)

    def uuid(self) -> Any:
        return "+".join(p.uuid() for p in self.passes)


def patches(knobs: dict[str, Any], current: Any) -> dict[str, Any]:
    """``knobs`` as Inductor config patches: each rewrite knob (:data:`REWRITES`) that is on becomes the post-grad
    pre-pass. Where this torch has no custom-pass interface, or the user set a post-grad pass of their own
    (``current``), the knobs are dropped with a warning and Inductor compiles the graph as it is."""
    out = dict(knobs)
    on = [make for knob, make in REWRITES.items() if out.pop(knob, False)]
    if not on:
        return out
    make = on[0] if len(on) == 1 else (lambda: Rewrites([m() for m in on]))
    return placed(out, "post_grad_custom_pre_pass", current, make, "the stored graph rewrites")
