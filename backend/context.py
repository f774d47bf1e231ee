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
from tuner.core import Forcing, Kind
from tuner.keys import task_key

log = logging.getLogger("tuner.backend")
_ACTIVE: ContextVar["CompileContext | None"] = ContextVar("tuner_compile_context", default=None)


def active() -> "CompileContext | None":
    return _ACTIVE.get()


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
    fusion_key: str = ""
    device: str = "cpu"
    pairs: dict[str, int] = field(default_factory=dict)  # fusions Inductor made or considered: pair id -> score


@dataclass
class Recorder:
    """What a record-mode compile saw: every template site and every graph, in order, each once."""

    sites: dict[str, SiteRecord] = field(default_factory=dict)
    graphs: dict[str, GraphRecord] = field(default_factory=dict)
    current_graph: str | None = None

    def site(self, key: str, payload: dict[str, Any], ids: list[str], default: int, scalars: dict[str, Any] | None = None) -> None:
        self.sites.setdefault(key, SiteRecord(key, payload["op"], payload["inputs"], list(ids), ids[default], self.current_graph, scalars))

    def graph(self, key: str, kind: str, payload: dict[str, Any], fusion_key: str = "", device: str = "cpu") -> None:
        self.current_graph = key
        index = sum(1 for g in self.graphs.values() if g.backward == payload["backward"])
        lines = payload["code"].count("\n")
        self.graphs.setdefault(key, GraphRecord(key, kind, payload["backward"], index, lines, fusion_key, device))

    def fusion_pair(self, pid: str, score: int) -> None:
        g = self.graphs.get(self.current_graph or "")
        if g is not None:
            g.pairs[pid] = max(score, g.pairs.get(pid, score))


class CompileContext:
    """``benchmark``: {site key: choice ids} to time side by side at each of those sites with Inductor's
    own benchmarker, in one compile; the timings land in :attr:`timings` ({site key: {choice id: ms}}).
    ``kernel_sink``: a list that collects the Triton kernels each graph's compile produced. ``site_timing``:
    ``cudagraph`` times the benchmarked choices of a CUDA site as CUDA-graph replays (``hooks/site_timing``)."""

    def __init__(
        self,
        forcing: Forcing,
        device_type: str,
        recorder: Recorder | None = None,
        benchmark: dict[str, tuple[str, ...]] | None = None,
        kernel_sink: list[Any] | None = None,
        site_timing: str = "launch",
    ):
        self.forcing = forcing
        self.device_type = device_type
        self.recorder = recorder
        self.benchmark = benchmark or {}
        self.kernel_sink = kernel_sink
        self.site_timing = site_timing
        self.timings: dict[str, dict[str, float]] = {}
        self.pruned: dict[str, dict[str, float]] = {}  # {site key: {choice id: probe ms}}: stopped early, slower
        self.vetoes: frozenset[str] = frozenset()  # fusion pairs vetoed in the graph being lowered

    def record_pruned(self, key: str, choice: str, ms: float) -> None:
        self.pruned.setdefault(key, {})[choice] = ms

    def record_timings(self, payload: dict[str, Any], timings: dict[str, float]) -> None:
        self.timings.setdefault(task_key(Kind.SITE, payload), {}).update(timings)

    @contextlib.contextmanager
    def activated(self) -> Iterator["CompileContext"]:
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def site_wants(self, key: str) -> tuple[str, ...]:
        """The choice ids this compile wants at a site: the ones to benchmark, or the forced one."""
        if key in self.benchmark:
            return tuple(self.benchmark[key])
        want = self.forcing.sites.get(key)
        return (want,) if want is not None else ()

    def forced_only(self, key: str) -> str | None:
        """The forced choice of a site that nothing records or benchmarks (so the others need not be built)."""
        if self.recorder is not None or key in self.benchmark:
            return None
        return self.forcing.sites.get(key)

    def trims_conv(self) -> bool:
        """Whether Inductor's own Triton conv configs can be skipped: nothing records or benchmarks, and no
        max-autotune mode will tune a miss (forced conv configs are built from their ids)."""
        import torch._inductor.config as inductor_config

        return self.recorder is None and not self.benchmark and not inductor_config.max_autotune

    def select_site(self, payload: dict[str, Any], ids: list[str], default: int, scalars: dict[str, Any] | None = None) -> list[int]:
        """Indices of the choices to hand Inductor: one (nothing is benchmarked), or the benchmarked set."""
        key = task_key(Kind.SITE, payload)
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

    @property
    def times_sites_as_graphs(self) -> bool:
        return self.site_timing == "cudagraph" and self.device_type == "cuda" and bool(self.benchmark)

    def fusion_allowed(self, pid: str, score: int) -> bool:
        """Asked by the fusion hook for every fusion Inductor is about to allow."""
        if self.recorder is not None:
            self.recorder.fusion_pair(pid, score)
        if pid in self.vetoes:
            counters.bump("vetoes")
            return False
        return True

    def graph_knobs(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The Inductor config patches for this graph: its codegen knobs and its fusion grouping's knobs
        (the grouping's pair vetoes go to :attr:`vetoes`)."""
        kind = Kind.graph_for(self.device_type)
        key = task_key(kind, payload)
        fkey = task_key(Kind.FUSION, payload)
        if self.recorder is not None:
            self.recorder.graph(key, kind, payload, fkey, self.device_type)
        which = "backward" if payload["backward"] else "forward"
        out: dict[str, Any] = {}
        for k, answer, what in ((key, self.forcing.graphs.get(key), "graph"), (fkey, self.forcing.fusion.get(fkey), "grouping")):
            if answer is None:
                if what == "graph" and not kind.is_graph:
                    continue  # no codegen knobs are tuned per graph on this device
                counters.bump("misses")
                log.info("miss: %s %s %s (Inductor's defaults)", which, what, k[:12])
                continue
            counters.bump("hits")
            log.info("hit: %s %s %s -> %s", which, what, k[:12], answer)
            out.update(answer)
        self.vetoes = frozenset(str(x) for x in out.pop("vetoes", []) or [])
        return out

    @property
    def wants_choices_hook(self) -> bool:
        """Whether this compile needs ``TunedChoices``: to record or veto fusions, or to build template choices."""
        return self.recorder is not None or bool(self.vetoes) or bool(self.forcing.sites) or bool(self.benchmark)
