"""The compile context: during one compile, which answers to force.

Adapters in ``backend/hooks`` ask the active context; outside a tuner compile none is active and the adapters leave
Inductor alone. The sweep's compiles run under its subclass (``backend/instrument/context.py``), which also records
what it sees, times template choices and captures kernels; each of those hook points is a no-op here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from tuner.backend import counters, journal
from tuner.backend.hooks import graph as graph_hook
from tuner.backend.hooks.restart import describe
from tuner.backend.journal import HIT, MISS, TRANSFERRED, Decision
from tuner.core import Forcing, Kind, site_name
from tuner.keys import task_key
from tuner.kinds import KERNEL_HOOK, descriptor, graph_hooked, where
from tuner.nearest import Nearest, Transfer
from tuner.search_spaces.cuda_graph import CUDA_GRAPHS
from tuner.search_spaces.freezing import FREEZING

log = logging.getLogger("tuner.backend")
_ACTIVE: ContextVar["CompileContext | None"] = ContextVar("tuner_compile_context", default=None)


def active() -> "CompileContext | None":
    return _ACTIVE.get()


class CompileContext:
    """The answers a compile forces: ``forcing`` (exact stored answers) and ``nearest`` (where a task has no exact
    answer, the nearest stored one stands in, counted as ``transferred``); ``cuda_graphs``: whether an answer may turn
    CUDA graphs on; ``rewrites_off``: rewrite knobs of the groupings left off (an ablation)."""

    def __init__(
        self,
        forcing: Forcing,
        device_type: str,
        nearest: Nearest | None = None,
        cuda_graphs: bool = True,
        rewrites_off: tuple[str, ...] = (),
    ):
        self.forcing = forcing
        self.device_type = device_type
        self.transfer = nearest is not None
        self.nearest = nearest or None  # answers for tasks with no exact entry (``tuner.nearest``); None: none
        self._graphs_seen: Counter[str] = Counter()  # graphs looked up so far, forward and backward (their names)
        self.vetoes: frozenset[str] = frozenset()  # fusion pairs vetoed in the graph being lowered
        self.cuda_graphs = cuda_graphs  # whether an answer may turn CUDA graphs on (``hooks/restart``)
        self.cuda_graphs_on = False  # whether one did
        self.rewrites_off = tuple(rewrites_off)
        self.refused: dict[str, str] = {}  # {choice id: why it cannot be built at the site being lowered}

    # --- what the sweep's context adds (``backend/instrument``); nothing here ---------------------------------------
    def record_timings(self, payload: dict[str, Any], timings: dict[str, float]) -> None:
        """Inductor timed a site's choices (a miss under a max-autotune mode): the sweep keeps the timings."""

    def benchmarking(self, payload: dict[str, Any], picks: list[Any], ids: list[str]) -> None:
        """A site hands Inductor several choices to time: the sweep times them its own way."""

    def graph_met(self, payload: dict[str, Any], keys: dict[str, str]) -> None:
        """A graph is looked up: ``keys``, its task key for each kind this graph looks up."""

    def lowering(self, gm: Any, is_backward: bool) -> None:
        """A graph is about to be lowered."""

    def kernels_built(self, kernels: list[Any]) -> None:
        """The Triton kernels a graph's compile produced (``CachingAutotuner`` objects)."""

    def fusion_refused_unshared(self, pid: str) -> None:
        """Told by the fusion hook of a template epilogue that Inductor refused only because the two share no
        data at the same index (``aggressive_fusion`` would admit it)."""

    @property
    def defers_sites(self) -> bool:
        """Whether a site's several choices are timed when Inductor schedules, not where it lowers the site."""
        return False

    @property
    def fresh_kernels(self) -> bool:
        """Whether kernels loaded earlier in this process must be forgotten (they keep the configs they had)."""
        return bool(self.kernel_table)

    @property
    def kernel_table(self) -> dict[str, Any]:
        """{Inductor's lookup hash: Triton config} of every kernel kind: what ``autotune_lookup_table`` forces."""
        return self.forcing.of(*where(hook=KERNEL_HOOK))

    @property
    def builds_choices(self) -> bool:
        """Whether template sites need choices Inductor would not list (a forced or transferred one)."""
        return bool(self.forcing.of(Kind.SITE)) or bool(self.nearest and self.nearest.sites)

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
        return (
            self.forcing.digest
            + (f"+{self.nearest.digest}" if self.nearest else "")
            + "".join(f"-{k}" for k in self.rewrites_off)
        )

    def _answer(self, key: str, payload: dict[str, Any]) -> tuple[str | None, Transfer | None]:
        """A site's stored choice, else the one transferred from the nearest stored site (with where from)."""
        want = self.forcing.get(Kind.SITE, key)
        if want is not None or self.nearest is None:
            return want, None
        moved = self.nearest.site(payload)
        return (moved.config["choice"], moved) if moved else (None, None)

    def site_wants(self, key: str, payload: dict[str, Any]) -> tuple[str, ...]:
        """The choice ids this compile wants at a site: the forced (or transferred) one."""
        want, _ = self._answer(key, payload)
        return (want,) if want is not None else ()

    def site_listed(self, key: str, ids: list[str]) -> None:
        """Told every config id Inductor listed at a site (``hooks/choices``), before the ones it need not render are
        left out (``templates.trim``)."""

    def trims_conv(self) -> bool:
        """Whether Inductor's own Triton conv configs can be skipped: no max-autotune mode will tune a miss (forced
        conv configs are built from their ids)."""
        import torch._inductor.config as inductor_config

        return not inductor_config.max_autotune

    def select_site(
        self, payload: dict[str, Any], ids: list[str], default: int, scalars: dict[str, Any] | None = None
    ) -> list[int]:
        """Indices of the choices to hand Inductor: one, so nothing is benchmarked."""
        key = task_key(Kind.SITE, payload)
        want, moved = self._answer(key, payload)
        name = site_name(payload["op"], payload["inputs"])
        if want is not None and want in ids:
            self._decide(Kind.SITE, key, name, TRANSFERRED if moved else HIT, want, moved)
            return [ids.index(want)]
        if want is not None:
            # e.g. a graph knob (cpp.simdlen=0) changed which micro-kernels exist, or the nearest stored site's
            # Triton config does not fit these sizes.
            why = f"{'the nearest stored site' if moved else 'the stored'} choice {want} is not offered here{_source(moved)}"
            why += f": {self.refused[want]}" if want in self.refused else ""
        else:
            why = self._no_entry("site", "of its op, layout and dtype")
        self._decide(Kind.SITE, key, name, MISS, None, reason=f"{why}; Inductor's default {ids[default]}")
        return [default]

    def refuse(self, choice: str, why: str) -> None:
        """A wanted choice the site cannot build (``hooks/templates``): its lookup's miss says why."""
        self.refused[choice] = why

    def kernels_lowered(self, kernels: list[tuple[str, str, str]]) -> None:
        """Count each tunable Triton kernel of the graph just lowered, given as (heuristic, lookup hash, name): a hit
        where its source has a stored config (Inductor's lookup table forced it), else a miss (kernels do not transfer:
        their source changes with the sizes)."""
        for heuristic, h, name in kernels:
            config = self.forcing.get(Kind.triton(heuristic), h)
            if config is not None:
                self._decide(Kind.triton(heuristic), h, name, HIT, config)
            else:
                self._decide(
                    Kind.triton(heuristic),
                    h,
                    name,
                    MISS,
                    None,
                    reason="no stored config for this kernel's source; Inductor's heuristics",
                )

    def _no_entry(self, what: str, family: str) -> str:
        if not self.transfer:
            return f"no stored winner for this {what} (transfer is off)"
        return f"no stored winner for this {what}, nor for one {family} at other sizes"

    def lookup(self, kind: str, key: str, what: str) -> Any:
        """The stored answer of a task of ``kind`` (None: Inductor's own choice), counted and journaled: what a kind's
        own adapter asks (``TaskKind.adapter``). No answer transfers from other sizes here."""
        answer = self.forcing.get(kind, key)
        if answer is not None:
            self._decide(kind, key, what, HIT, answer)
        elif not descriptor(kind).quiet_miss:
            self._decide(kind, key, what, MISS, None, reason="no stored winner for it; Inductor's default")
        return answer

    def _decide(
        self, kind: str, key: str, what: str, outcome: str, answer: Any, moved: Transfer | None = None, reason: str = ""
    ) -> None:
        """Count, log and journal one lookup's outcome."""
        counters.bump({HIT: "hits", TRANSFERRED: "transferred", MISS: "misses"}[outcome])
        if moved is not None:
            reason = f"{moved.distance:.1f} log2 sizes away"
        log.info("%s: %s %s -> %s%s", outcome, what, key[:12], answer if answer is not None else reason, _source(moved))
        journal.note(Decision(str(kind), key, what, outcome, answer, reason, moved.source if moved else None))

    @property
    def watches_fusions(self) -> bool:
        """Whether the fusion hook must name each fusion for this compile (it vetoes some)."""
        return bool(self.vetoes)

    def fusion_allowed(self, pid: str, score: int) -> bool:
        """Asked by the fusion hook for every fusion Inductor is about to allow."""
        if pid in self.vetoes:
            counters.bump("vetoes")
            return False
        return True

    def restarting(self, patches: dict[str, Any]) -> None:
        """The graph just looked up is compiled again under ``patches`` (``hooks/restart``): its second lookup keeps its
        name."""
        self._graphs_seen["forward"] -= 1
        self.cuda_graphs_on = self.cuda_graphs_on or bool(patches.get(CUDA_GRAPHS))
        log.info("compiling a graph again %s, as its answer says", describe(patches))

    def graph_knobs(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The Inductor config patches for this graph: the answer of every kind a graph of this device looks up
        (``tuner.kinds.graph_hooked``: codegen knobs, CUDA graphs, its fusion grouping, whose pair vetoes go to
        :attr:`vetoes`)."""
        which = "backward" if payload["backward"] else "forward"
        name = f"{which} graph {self._graphs_seen[which]}"
        self._graphs_seen[which] += 1
        # e.g. a backward graph runs under CUDA graphs as its forward does: no CUDA-graph task of its own
        kinds = [k for k in graph_hooked(self.device_type) if not (k.forward_only and payload["backward"])]
        keys = {k.value: task_key(k.value, payload) for k in kinds}
        self.graph_met(payload, keys)
        out: dict[str, Any] = {}
        transfer = self._graph_transfer(payload)
        for kind in kinds:
            key = keys[kind.value]
            answer = self.forcing.get(kind.value, key)
            moved = transfer(kind.value) if answer is None and kind.transfers else None
            if moved is not None:
                answer = moved.config
            if answer is None and kind.quiet_miss:
                continue  # Inductor's own choice; the graph's other lookups say whether the graph is known at all
            what = f"{name} {kind.label}".rstrip()
            if answer is None:
                self._decide(
                    kind.value,
                    key,
                    what,
                    MISS,
                    None,
                    reason=self._no_entry("graph", "of the same code") + "; Inductor's defaults",
                )
                continue
            self._decide(kind.value, key, what, TRANSFERRED if moved else HIT, answer, moved)
            out.update(
                answer, **({FREEZING: False} if out.get(FREEZING) is False else {})
            )  # an older fusion answer's "frozen" yields
        if not self.cuda_graphs:
            out.pop(CUDA_GRAPHS, None)
        for knob in self.rewrites_off:
            out.pop(knob, None)
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
        """Whether this compile needs ``TunedChoices``: to veto fusions, to build template choices or, on CUDA, to
        render only the template configs it may pick (dozens a site that it would otherwise render,
        ``hooks/templates``)."""
        return bool(self.vetoes) or self.builds_choices or self.device_type == "cuda"


def _source(moved: Transfer | None) -> str:
    return f" (from stored task {moved.source[:12]}, {moved.distance:.1f} log2 sizes away)" if moved else ""


def _sizes(shapes: list[list[int]] | None) -> tuple[tuple[int, ...], ...] | None:
    return None if shapes is None else tuple(tuple(s) for s in shapes)
