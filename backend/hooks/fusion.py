"""Hook (c): fusion decisions, through an ``InductorChoices`` handler installed with ``V.set_choices_handler``.

The scheduler asks ``V.choices.can_fuse(scheduler, node1, node2, shared_data_score)`` after a fusion
has proved legal; answering False vetoes it. The handler records every pair Inductor would fuse (with
its score) and vetoes the pairs the active compile context names. A pair is identified by its two
nodes' FX origins and node types (not buffer numbers), so the same pair gets the same id in another
process; a vetoed pair that no longer exists simply never matches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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
        raise HookUnavailable("InductorChoices.can_fuse / V.set_choices_handler are missing; fusion groupings cannot be applied")


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


class TunedChoices(_Base):  # type: ignore[misc, valid-type]
    @staticmethod
    def can_fuse(scheduler: Any, node1: Any, node2: Any, shared_data_score: int) -> bool:
        ok = _Base.can_fuse(scheduler, node1, node2, shared_data_score)
        ctx = active()
        if not ok or ctx is None:
            return ok
        pid = pair_id(node1, node2)
        return ctx.fusion_allowed(pid, int(shared_data_score))


@contextlib.contextmanager
def handler() -> Iterator[None]:
    """Inductor's scheduler consults ``TunedChoices`` while this is active (this thread)."""
    check()
    with V.set_choices_handler(TunedChoices()):
        yield
