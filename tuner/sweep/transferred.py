"""What a user's compile of the workload would take from other sizes: for each of its tasks with no stored winner (a
sweep cut short, a site it never reached), the winner of the nearest stored task (``tuner.nearest``), as
``backend="tuned"`` transfers it. The whole-workload check times these with the winners, so no answer reaches the
user's compile unmeasured; one the workload is slower with gets Inductor's default stored as its task's winner, an
exact answer that no transfer overrides."""

from __future__ import annotations

from typing import Any

from tuner.core import Forcing, Kind
from tuner.search_spaces import valid_winners
from tuner.kinds import descriptor
from tuner.nearest import Nearest, Transfer, parse_shapes

Pairs = list[tuple[Any, Any]]  # (TaskSpec, TaskRecord)


def transferred(stored: dict[str, Any], pairs: Pairs, answered: set[int]) -> dict[int, Forcing]:
    """{task id: the answer transferred to it} for the tasks of ``pairs`` not in ``answered`` (those with a stored
    winner), from ``stored`` ({task key: (kind, config, signature)}, every winner on the device, as the database
    reads them)."""
    nearest = Nearest.from_winners(valid_winners(stored))
    if not nearest:
        return {}
    out = {}
    for t, r in pairs:
        if r.id in answered or t.key in stored:
            continue
        moved = _moved(nearest, t)
        if moved is not None:
            out[r.id] = _forcing(t, moved)
    return out


def _moved(nearest: Nearest, task: Any) -> Transfer | None:
    """The answer a compile would transfer to ``task``, as ``backend/context`` looks it up."""
    sig = task.signature
    if task.kind == Kind.SITE:
        return nearest.site(sig)
    if not descriptor(task.kind).transfers or not isinstance(sig.get("family"), str):
        return None
    return nearest.graph(str(task.kind), sig["family"], parse_shapes(sig.get("shapes")))


def _forcing(task: Any, moved: Transfer) -> Forcing:
    """A site's transferred choice as its own answer; a graph's is already in the form a compile applies."""
    if task.kind == Kind.SITE:
        return task.forcing(moved.config)
    return Forcing({str(task.kind): {task.key: moved.config}})
