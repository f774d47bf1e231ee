"""The compile context: during one compile, which answers to force and what to record.

Adapters in ``backend/hooks`` ask the active context; outside a tuner compile none
is active and the adapters leave Inductor alone.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from tuner.backend import counters, journal
from tuner.backend.hooks import graph as graph_hook
from tuner.backend.hooks.restart import describe
from tuner.backend.journal import HIT, MISS, TRANSFERRED, Decision
from tuner.core import Forcing, Kind, site_name
from tuner.keys import task_key
from tuner.nearest import Nearest, Transfer
from tuner.search_spaces.cuda_graph import CUDA_GRAPHS

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
    fp32_precision: str = ""


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
    unshared: list[str] = field(default_factory=list)  # template epilogues refused for sharing no indexed data
    s2d_convs: int = 0  # convolutions the space-to-depth rewrite applies to (``hooks/conv_rewrite``)
    frozen: bool = False  # compiled with Inductor's freezing (``hooks/restart``)
    family: str = ""  # the graph at any sizes (``hooks/graph.graph_family``), for answers at other sizes
    shapes: list[list[int]] | None = None  # its inputs' sizes


@dataclass
class Recorder:
    """What a record-mode compile saw: every template site and every graph, in order, each once."""

    sites: dict[str, SiteRecord] = field(default_factory=dict)
    graphs: dict[str, GraphRecord] = field(default_factory=dict)
    current_graph: str | None = None

    def site(self, key: str, payload: dict[str, Any], ids: list[str], default: int, scalars: dict[str, Any] | None = None) -> None:
        precision = str(payload.get("fp32_precision", ""))
        self.sites.setdefault(key, SiteRecord(key, payload["op"], payload["inputs"], list(ids), ids[default], self.current_graph, scalars, precision))

    def graph(self, key: str, kind: str, payload: dict[str, Any], fusion_key: str = "", device: str = "cpu") -> None:
        self.current_graph = key
        index = sum(1 for g in self.graphs.values() if g.backward == payload["backward"])
        lines = payload["code"].count("\n")
        family, shapes = graph_hook.graph_family(payload), graph_hook.graph_shapes(payload)
        self.graphs.setdefault(key, GraphRecord(key, kind, payload["backward"], index, lines, fusion_key, device, family=family, shapes=shapes))

    def _current(self) -> GraphRecord | None:
        return self.graphs.get(self.current_graph or "")

    def fusion_pair(self, pid: str, score: int) -> None:
        if (g := self._current()) is not None:
            g.pairs[pid] = max(score, g.pairs.get(pid, score))

    def unshared_epilogue(self, pid: str) -> None:
        if (g := self._current()) is not None and pid not in g.unshared:
            g.unshared.append(pid)

    def lowering(self, s2d_convs: int, frozen: bool) -> None:
        """What the graph about to be lowered holds: convolutions the space-to-depth rewrite applies to, and whether
        it is compiled frozen."""
        if (g := self._current()) is not None:
            g.s2d_convs, g.frozen = s2d_convs, frozen


class CompileContext:
    """``benchmark``: {site key: choice ids} to time side by side at each of those sites with Inductor's
    own benchmarker, in one compile; the timings land in :attr:`timings` ({site key: {choice id: ms}}).
    ``kernel_sink``: a list that collects the Triton kernels each graph's compile produced. ``site_timing``:
    how the benchmarked choices of a CUDA site are timed (``hooks/site_timing``: pipelined, launch, cudagraph).
    ``nearest``: where a task has no exact answer, the nearest stored one stands in (counted as ``transferred``)."""

    def __init__(
        self,
        forcing: Forcing,
        device_type: str,
        recorder: Recorder | None = None,
        benchmark: dict[str, tuple[str, ...]] | None = None,
        kernel_sink: list[Any] | None = None,
        site_timing: str = "pipelined",
        nearest: Nearest | None = None,
        site_defer: bool = False,
        cuda_graphs: bool = True,
    ):
        self.forcing = forcing
        self.device_type = device_type
        self.recorder = recorder
        self.benchmark = benchmark or {}
        self.kernel_sink = kernel_sink
        self.site_timing = site_timing
        self.site_defer = site_defer
        self.transfer = nearest is not None
        self.nearest = nearest or None  # answers for tasks with no exact entry (``tuner.nearest``); None: none
        self._graphs_seen: Counter[str] = Counter()  # graphs looked up so far, forward and backward (their names)
        self.timings: dict[str, dict[str, float]] = {}
        self.pruned: dict[str, dict[str, float]] = {}  # {site key: {choice id: probe ms}}: stopped early, slower
        self.vetoes: frozenset[str] = frozenset()  # fusion pairs vetoed in the graph being lowered
        self.cuda_graphs = cuda_graphs  # whether an answer may turn CUDA graphs on (``hooks/restart``)
        self.cuda_graphs_on = False  # whether one did

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

    @property
    def answers_digest(self) -> str:
        """What this compile applies, for Inductor's cache keys."""
        return self.forcing.digest + (f"+{self.nearest.digest}" if self.nearest else "")

    def _answer(self, key: str, payload: dict[str, Any]) -> tuple[str | None, Transfer | None]:
        """A site's stored choice, else the one transferred from the nearest stored site (with where from)."""
        want = self.forcing.sites.get(key)
        if want is not None or self.nearest is None:
            return want, None
        moved = self.nearest.site(payload)
        return (moved.config["choice"], moved) if moved else (None, None)

    def site_wants(self, key: str, payload: dict[str, Any]) -> tuple[str, ...]:
        """The choice ids this compile wants at a site: the ones to benchmark, or the forced (or transferred) one."""
        if key in self.benchmark:
            return tuple(self.benchmark[key])
        want, _ = self._answer(key, payload)
        return (want,) if want is not None else ()

    def forced_only(self, key: str, payload: dict[str, Any]) -> str | None:
        """The forced choice of a site that nothing records or benchmarks (so the others need not be built)."""
        if self.recorder is not None or key in self.benchmark:
            return None
        return self._answer(key, payload)[0]

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
        want, moved = self._answer(key, payload)
        name = site_name(payload["op"], payload["inputs"])
        if want is not None and want in ids:
            self._decide(Kind.SITE, key, name, TRANSFERRED if moved else HIT, want, moved)
            return [ids.index(want)]
        if want is not None:
            # e.g. a graph knob (cpp.simdlen=0) changed which micro-kernels exist, or the nearest stored site's
            # Triton config does not fit these sizes.
            why = f"{'the nearest stored site' if moved else 'the stored'} choice {want} is not offered here{_source(moved)}"
        else:
            why = self._no_entry("site", "of its op, layout and dtype")
        self._decide(Kind.SITE, key, name, MISS, None, reason=f"{why}; Inductor's default {ids[default]}")
        return [default]

    def kernels_lowered(self, kernels: list[tuple[str, str, str]]) -> None:
        """Count each tunable Triton kernel of the graph just lowered, given as (heuristic, lookup hash, name): a hit
        where its source has a stored config (Inductor's lookup table forced it), else a miss (kernels do not transfer:
        their source changes with the sizes)."""
        for heuristic, h, name in kernels:
            config = self.forcing.kernels.get(h)
            if config is not None:
                self._decide(Kind.triton(heuristic), h, name, HIT, config)
            else:
                self._decide(Kind.triton(heuristic), h, name, MISS, None, reason="no stored config for this kernel's source; Inductor's heuristics")

    def _no_entry(self, what: str, family: str) -> str:
        if not self.transfer:
            return f"no stored winner for this {what} (transfer is off)"
        return f"no stored winner for this {what}, nor for one {family} at other sizes"

    def _decide(self, kind: str, key: str, what: str, outcome: str, answer: Any, moved: Transfer | None = None, reason: str = "") -> None:
        """Count, log and journal one lookup's outcome."""
        counters.bump({HIT: "hits", TRANSFERRED: "transferred", MISS: "misses"}[outcome])
        if moved is not None:
            reason = f"{moved.distance:.1f} log2 sizes away"
        log.info("%s: %s %s -> %s%s", outcome, what, key[:12], answer if answer is not None else reason, _source(moved))
        journal.note(Decision(str(kind), key, what, outcome, answer, reason, moved.source if moved else None))

    @property
    def prunes_sites(self) -> bool:
        """Whether a benchmarked site's candidates stop after a probe when clearly slower (``hooks/site_timing``):
        on CUDA only. On the CPU a CPP GEMM choice's probe (a Python call of its benchmark function) measured 1000x
        its kernel's time at an mlp's 16x64 site, which no floor separates from a slow kernel; CPU sites offer two
        or three choices, so there is little to save."""
        return self.device_type == "cuda" and bool(self.benchmark)

    @property
    def retimes_sites(self) -> str | None:
        """How this compile's benchmarked CUDA site choices are timed in place of Inductor's way (``hooks/site_timing``
        ``TIMERS``), or None: Inductor's own timing (``launch``, the CPU, a compile that benchmarks nothing)."""
        on = self.site_timing != "launch" and self.device_type == "cuda" and bool(self.benchmark)
        return self.site_timing if on else None

    @property
    def defers_sites(self) -> bool:
        """Whether a benchmarked CUDA site's choices are timed when Inductor schedules, not where it lowers the site
        (``hooks/selector``): their compiles then overlap the rest of the lowering instead of waiting site by site."""
        return self.site_defer and self.device_type == "cuda" and bool(self.benchmark)

    def fusion_allowed(self, pid: str, score: int) -> bool:
        """Asked by the fusion hook for every fusion Inductor is about to allow."""
        if self.recorder is not None:
            self.recorder.fusion_pair(pid, score)
        if pid in self.vetoes:
            counters.bump("vetoes")
            return False
        return True

    def fusion_refused_unshared(self, pid: str) -> None:
        """Told by the fusion hook of a template epilogue that Inductor refused only because the two share no
        data at the same index (``aggressive_fusion`` would admit it)."""
        if self.recorder is not None:
            self.recorder.unshared_epilogue(pid)

    def restarting(self, patches: dict[str, Any]) -> None:
        """The graph just looked up is compiled again under ``patches`` (``hooks/restart``): its second lookup keeps its
        name."""
        self._graphs_seen["forward"] -= 1
        self.cuda_graphs_on = self.cuda_graphs_on or bool(patches.get(CUDA_GRAPHS))
        log.info("compiling a graph again %s, as its answer says", describe(patches))

    def graph_knobs(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The Inductor config patches for this graph: its codegen knobs and its fusion grouping's knobs
        (the grouping's pair vetoes go to :attr:`vetoes`)."""
        kind = Kind.graph_for(self.device_type)
        key = task_key(kind, payload)
        fkey = task_key(Kind.FUSION, payload)
        if self.recorder is not None:
            self.recorder.graph(key, kind, payload, fkey, self.device_type)
        which = "backward" if payload["backward"] else "forward"
        name = f"{which} graph {self._graphs_seen[which]}"
        self._graphs_seen[which] += 1
        out: dict[str, Any] = {}
        transfer = self._graph_transfer(payload)
        for k, k_kind, answer in ((key, kind, self.forcing.graphs.get(key)), (fkey, Kind.FUSION, self.forcing.fusion.get(fkey))):
            if k_kind is kind and not kind.is_graph:
                continue  # no knobs are tuned per graph on this device
            if k_kind is Kind.CUDA_GRAPH and payload["backward"]:
                continue  # a backward graph runs under CUDA graphs as its forward does: no task of its own
            what = name if k_kind is kind else f"{name} fusion"
            moved = transfer(k_kind) if answer is None else None
            if moved is not None:
                answer = moved.config
            if answer is None and k_kind is Kind.CUDA_GRAPH:
                continue  # off, Inductor's own choice; the graph's fusion lookup says whether the graph is known at all
            if answer is None:
                self._decide(k_kind, k, what, MISS, None, reason=self._no_entry("graph", "of the same code") + "; Inductor's defaults")
                continue
            self._decide(k_kind, k, what, TRANSFERRED if moved else HIT, answer, moved)
            out.update(answer)
        if not self.cuda_graphs:
            out.pop(CUDA_GRAPHS, None)
        self.vetoes = frozenset(str(x) for x in out.pop("vetoes", []) or [])
        return out

    def _graph_transfer(self, payload: dict[str, Any]) -> Callable[[Kind], Transfer | None]:
        """The nearest stored answer of a kind for this graph; its family is read once, when first asked."""
        nearest = self.nearest
        if nearest is None:
            return lambda kind: None
        family = functools.cache(lambda: (graph_hook.graph_family(payload), _sizes(graph_hook.graph_shapes(payload))))
        return lambda kind: nearest.graph(kind, *family())

    @property
    def wants_choices_hook(self) -> bool:
        """Whether this compile needs ``TunedChoices``: to record or veto fusions, or to build template choices."""
        sites = bool(self.forcing.sites) or bool(self.nearest and self.nearest.sites)
        return self.recorder is not None or bool(self.vetoes) or sites or bool(self.benchmark)


def _source(moved: Transfer | None) -> str:
    return f" (from stored task {moved.source[:12]}, {moved.distance:.1f} log2 sizes away)" if moved else ""


def _sizes(shapes: list[list[int]] | None) -> tuple[tuple[int, ...], ...] | None:
    return None if shapes is None else tuple(tuple(s) for s in shapes)
