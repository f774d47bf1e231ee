"""Hook (c): fusion decisions, asked of ``TunedChoices.can_fuse`` (``backend/hooks/choices.py``).

The scheduler asks ``V.choices.can_fuse(scheduler, node1, node2, shared_data_score)`` after a fusion
has proved legal; answering False vetoes it. The handler records every pair Inductor would fuse (with
its score) and vetoes the pairs the active compile context names. A pair is identified by its two
nodes' FX origins and node types (not buffer numbers), so the same pair gets the same id in another
process; a vetoed pair that no longer exists simply never matches.
"""

from __future__ import annotations

from typing import Any

from tuner.backend.context import active
from tuner.backend.errors import HookUnavailable
from tuner.keys import digest

try:
    from torch._inductor.choices import InductorChoices as _Base
    from torch._inductor.virtualized import V
except ImportError as e:  # pragma: no cover - depends on the torch build
    _Base, V = object, None  # type: ignore[assignment,misc]
    _IMPORT_ERROR: Exception | None = e
else:
    _IMPORT_ERROR = None


def check() -> None:
    if _IMPORT_ERROR is not None or not hasattr(_Base, "can_fuse") or not hasattr(V, "set_choices_handler"):
        raise HookUnavailable(
            "InductorChoices.can_fuse / V.set_choices_handler are missing; fusion groupings cannot be applied"
        )


def _describe(node: Any) -> list[str]:
    out = []
    for n in node.get_nodes():
        ir = getattr(n, "node", None)
        origins = sorted(str(getattr(o, "name", o)) for o in (getattr(ir, "origins", None) or ()))
        out.append(f"{type(n).__name__}[{','.join(origins)}]")
    return sorted(out)


def pair_id(node1: Any, node2: Any) -> str:
    """Stable across processes: the nodes' FX origins and scheduler node types, in fusion order."""
    return digest([_describe(node1), _describe(node2)])[:16]


def _is_template(node: Any) -> bool:
    is_template = getattr(node, "is_template", None)
    return bool(is_template()) if callable(is_template) else False


def refused_for_no_shared_data(node1: Any, shared_data_score: int) -> bool:
    """Whether a refused fusion of an epilogue into the template ``node1`` was refused only because the two share no
    data at the same index: Inductor's first heuristic refuses a score of 0 unless ``aggressive_fusion`` is set."""
    from tuner.backend.process import inductor_flag

    return int(shared_data_score) == 0 and _is_template(node1) and not inductor_flag("aggressive_fusion")


def allowed(base: bool, node1: Any, node2: Any, shared_data_score: int) -> bool:
    """Inductor's own answer ``base``, unless the active compile vetoes the pair. A template epilogue refused for
    sharing no indexed data is told to the compile (a recording counts them)."""
    ctx = active()
    if ctx is None or not ctx.watches_fusions:  # nothing to veto or record: no pair id to compute
        return base
    if not base:
        if refused_for_no_shared_data(node1, shared_data_score):
            ctx.fusion_refused_unshared(pair_id(node1, node2))
        return base
    return ctx.fusion_allowed(pair_id(node1, node2), int(shared_data_score))
