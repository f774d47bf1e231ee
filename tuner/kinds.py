"""Task kinds as descriptors: each kind of tuning decision is one :class:`TaskKind`, declared beside its search space
(``search_spaces/<family>.py``) and registered once (``search_spaces/__init__.py``). Everything else asks the
registry: the compile-time hook that forces a kind's answers, where those sit in a :class:`~tuner.core.Forcing`, which
sweep phase measures it, what its trials cost, and which winner group the whole-workload check can drop.

Adding a kind: a module with its space and its descriptor, one registration line, and (for a decision no existing
hook point applies) its adapter in ``backend/hooks``. Plain data with no torch import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.search_spaces import Space

SITE_HOOK, GRAPH_HOOK, KERNEL_HOOK = "site", "graph", "kernel"  # where a compile applies a kind's answers


def _as_is(key: str, config: dict[str, Any], signature: dict[str, Any]) -> tuple[str, Any] | None:
    return key, dict(config)


@dataclass(frozen=True)
class TaskKind:
    """One kind of tuning decision.

    ``value``: the string stored in the database and in exported files. ``space``: builds its search space from a
    signature's ``space`` entry. ``hook``: where a compile applies its answers (``SITE_HOOK``: a template selection
    site; ``GRAPH_HOOK``: Inductor config patches per graph, looked up on ``devices``; ``KERNEL_HOOK``: Inductor's
    lookup table of Triton configs). ``answer``: (task key, config, signature) -> (the key the hook looks up, the value
    it applies), or None where the signature describes nothing to force. ``phase``: the name of the sweep phase that
    measures it; ``cost``: the cost line its trials are budgeted on (``tuner.budget.estimate``); ``group``: the winner
    group the whole-workload check can drop. ``beside_base``: every trial times the whole workload beside its base (its
    study measures no separate default); ``forward_only``: a backward graph follows its forward's answer;
    ``quiet_miss``: no answer is Inductor's own choice, not a miss; ``transfers``: the nearest stored answer at other
    sizes may stand in; ``label``: what a graph-hooked lookup is called after its graph ("forward graph 0 fusion");
    ``graph_task``: for a graph-hooked kind whose tasks come from the sweep's capture, (recorded graph, recorded
    sites, device info) -> the ``space`` entry of that graph's task signature, or None for no task. ``adapter``: for a
    kind that no built-in hook point applies, the module (in ``tuner.backend.hooks``) that applies it, with any of:
    ``install(device_type)``, which every compile on the kind's devices calls first (the adapter then asks the active
    context for its answers, ``CompileContext.lookup``); for a graph-hooked kind, ``patches(knobs, config)``, which
    turns the kind's answer among a graph's knobs into Inductor config patches (``config``: Inductor's config, to see
    what the user set), and ``found(gm)``, what a graph about to be lowered holds for the kind (kept with the recorded
    graph under ``found[kind]``, where ``graph_task`` reads it). A kind whose ``phase`` no built-in phase has is
    measured by a graph study of its own (``tuner.sweep.phases.graphs.GraphStudyPhase``). ``work``: the multiply-adds
    per step of what a task of the kind decides, from its signature's ``space`` entry (an attention site's two GEMMs,
    say): its share of the step's library time, from which the sweep expects what its phase can gain
    (``tuner.budget.gain``); None: the kind claims none. ``library_ops``: the library calls
    (``measure/busy.LIBRARY_OPS``, without ``aten::``) whose profiled time its tasks decide: where the capture timed
    them, that time is its phase's share instead."""

    value: str
    space: Callable[[dict[str, Any]], Space]
    hook: str
    phase: str
    cost: str
    group: str
    answer: Callable[[str, dict[str, Any], dict[str, Any]], tuple[str, Any] | None] = _as_is
    devices: tuple[str, ...] = ("cpu", "cuda")
    beside_base: bool = False
    forward_only: bool = False
    quiet_miss: bool = False
    transfers: bool = True
    label: str = ""
    graph_task: Callable[[dict[str, Any], list[dict[str, Any]], dict[str, Any]], dict[str, Any] | None] | None = None
    adapter: str = ""
    work: Callable[[dict[str, Any]], float] | None = None
    library_ops: tuple[str, ...] = ()


_REGISTRY: dict[str, TaskKind] = {}


def register(*kinds: TaskKind) -> None:
    for k in kinds:
        if _REGISTRY.get(k.value, k) != k:
            raise ValueError(f"task kind {k.value!r} is registered twice")
        _REGISTRY[k.value] = k


# The module whose import registers the built-in kinds (:func:`register`), loaded by name on the first lookup: a
# kind's module depends on this registry, never the registry on a kind (as a kind's ``adapter`` is loaded by name).
BUILT_IN = "tuner.search_spaces"


def registered() -> tuple[TaskKind, ...]:
    """Every kind, in registration order."""
    importlib.import_module(BUILT_IN)
    return tuple(_REGISTRY.values())


def descriptor(kind: str) -> TaskKind:
    """Raises KeyError for a kind nobody registered (a stored or imported string is never trusted)."""
    if str(kind) not in _REGISTRY:
        registered()
    return _REGISTRY[str(kind)]


def where(**fields: Any) -> tuple[str, ...]:
    """The kinds whose descriptor has these field values, e.g. ``where(hook=KERNEL_HOOK)``."""
    return tuple(k.value for k in registered() if all(getattr(k, f) == v for f, v in fields.items()))


def beside_base(kind: str) -> bool:
    """Whether a trial of ``kind`` compiles the whole workload and times it beside its base (False for a cost line
    that is no task kind)."""
    try:
        return descriptor(kind).beside_base
    except KeyError:
        return False


def graph_hooked(device_type: str) -> tuple[TaskKind, ...]:
    """The kinds a graph of this device type looks up, in registration order."""
    return tuple(k for k in registered() if k.hook == GRAPH_HOOK and device_type in k.devices)


def graph_knobs_kind(device_type: str) -> str | None:
    """The kind a recorded graph of this device type is tuned as (its codegen knobs), or None."""
    return next((k.value for k in graph_hooked(device_type) if k.group == "graph-knob"), None)


def adapted(device_type: str, hook: str | None = None) -> tuple[tuple[TaskKind, Any], ...]:
    """(kind, its adapter module) of every kind with an adapter on this device type (of ``hook`` where given)."""
    return tuple(
        (k, importlib.import_module(k.adapter))
        for k in registered()
        if k.adapter and device_type in k.devices and (hook is None or k.hook == hook)
    )


def named(names: Iterable[str]) -> tuple[str, ...]:
    """The kinds that winner groups or kinds named by ``names`` hold (``template-site``, ``cuda_graph``, …); raises
    KeyError naming what is unknown."""
    by_group, out = groups(), []
    for name in names:
        if name in by_group:
            out += by_group[name]
        elif name in where():
            out.append(str(name))
        else:
            raise KeyError(
                f"{name!r} is neither a winner group ({', '.join(by_group)}) nor a task kind ({', '.join(where())})"
            )
    return tuple(dict.fromkeys(out))


def groups() -> dict[str, tuple[str, ...]]:
    """{winner group: its kinds}, in registration order."""
    out: dict[str, tuple[str, ...]] = {}
    for k in registered():
        out[k.group] = (*out.get(k.group, ()), k.value)
    return out


__all__ = [
    "GRAPH_HOOK",
    "KERNEL_HOOK",
    "SITE_HOOK",
    "TaskKind",
    "adapted",
    "beside_base",
    "descriptor",
    "graph_hooked",
    "graph_knobs_kind",
    "groups",
    "named",
    "register",
    "registered",
    "where",
]
