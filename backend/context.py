"""The compile context: during one compile, which answers to force and what to record.

Adapters in ``backend/hooks`` ask the active context; outside a tuner compile none
is active and the adapters leave Inductor alone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from tuner.backend import counters
from tuner.backend.forcing import SITE_KIND, Forcing
from tuner.keys import task_key

log = logging.getLogger("tuner.backend")
_ACTIVE: ContextVar["CompileContext | None"] = ContextVar("tuner_compile_context", default=None)


def active() -> "CompileContext | None":
    return _ACTIVE.get()


def graph_kind(device_type: str) -> str:
    return "cpp_graph" if device_type == "cpu" else f"{device_type}_graph"


@dataclass
class SiteRecord:
    key: str
    op: str
    inputs: list[Any]
    choices: list[str]
    default: str
    graph: str | None = None  # key of the graph being lowered when the site was met
    scalars: dict[str, Any] | None = None  # e.g. addmm's alpha and beta (not part of the key)


@dataclass
class GraphRecord:
    key: str
    kind: str
    backward: bool
    index: int
    lines: int


@dataclass
class Recorder:
    """What a record-mode compile saw: every template site and every graph, in order, each once."""

    sites: dict[str, SiteRecord] = field(default_factory=dict)
    graphs: dict[str, GraphRecord] = field(default_factory=dict)
    current_graph: str | None = None

    def site(self, key: str, payload: dict[str, Any], ids: list[str], default: int, scalars: dict[str, Any] | None = None) -> None:
        self.sites.setdefault(key, SiteRecord(key, payload["op"], payload["inputs"], list(ids), ids[default], self.current_graph, scalars))

    def graph(self, key: str, kind: str, payload: dict[str, Any]) -> None:
        self.current_graph = key
        index = sum(1 for g in self.graphs.values() if g.backward == payload["backward"])
        self.graphs.setdefault(key, GraphRecord(key, kind, payload["backward"], index, payload["code"].count("\n")))


class CompileContext:
    """``benchmark``: {site key: choice ids} to time side by side at each of those sites with Inductor's
    own benchmarker, in one compile; the timings land in :attr:`timings` ({site key: {choice id: ms}}).
    ``kernel_sink``: a list that collects the Triton kernels each graph's compile produced."""

    def __init__(
        self,
        forcing: Forcing,
        device_type: str,
        recorder: Recorder | None = None,
        benchmark: dict[str, tuple[str, ...]] | None = None,
        kernel_sink: list[Any] | None = None,
    ):
        self.forcing = forcing
        self.device_type = device_type
        self.recorder = recorder
        self.benchmark = benchmark or {}
        self.kernel_sink = kernel_sink
        self.timings: dict[str, dict[str, float]] = {}

    def record_timings(self, payload: dict[str, Any], timings: dict[str, float]) -> None:
        self.timings.setdefault(task_key(SITE_KIND, payload), {}).update(timings)

    @contextlib.contextmanager
    def activated(self) -> Iterator["CompileContext"]:
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def select_site(self, payload: dict[str, Any], ids: list[str], default: int, scalars: dict[str, Any] | None = None) -> list[int]:
        """Indices of the choices to hand Inductor: one (nothing is benchmarked), or the benchmarked set."""
        key = task_key(SITE_KIND, payload)
        if self.recorder is not None:
            self.recorder.site(key, payload, ids, default, scalars)
        if key in self.benchmark:
            picked = list(dict.fromkeys(ids.index(c) for c in self.benchmark[key] if c in ids))
            if len(picked) >= 2:
                return picked
        want = self.forcing.sites.get(key)
        if want is not None and want in ids:
            counters.bump("hits")
            log.info("hit: %s site %s -> %s", payload["op"], key[:12], want)
            return [ids.index(want)]
        if want is not None:
            # e.g. a graph knob (cpp.simdlen=0) changed which micro-kernels exist; the sweep measured the same.
            log.info("stored choice %s is not offered at %s site %s; using Inductor's default", want, payload["op"], key[:12])
        counters.bump("misses")
        log.info("miss: %s site %s -> %s (Inductor's default)", payload["op"], key[:12], ids[default])
        return [default]

    def graph_knobs(self, payload: dict[str, Any]) -> dict[str, Any]:
        kind = graph_kind(self.device_type)
        key = task_key(kind, payload)
        if self.recorder is not None:
            self.recorder.graph(key, kind, payload)
        knobs = self.forcing.graphs.get(key)
        which = "backward" if payload["backward"] else "forward"
        if knobs is None:
            counters.bump("misses")
            log.info("miss: %s graph %s (Inductor's defaults)", which, key[:12])
            return {}
        counters.bump("hits")
        log.info("hit: %s graph %s -> %s", which, key[:12], knobs)
        return dict(knobs)
