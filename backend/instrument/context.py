"""The sweep's compile context: the answers it forces (as a user's compile would), plus what it measures with.

``recorder``: every template site and graph the compile meets (``recorder.py``). ``benchmark``: {site key: choice
ids} to time side by side at each of those sites, in one compile; the timings land in :attr:`timings` ({site key:
{choice id: ms}}), choices stopped after a probe in :attr:`pruned`. ``kernel_sink``: a list that collects the Triton
kernels each graph's compile produced, with their first call's arguments (``capture.py``). ``site_timing``: how a
CUDA site's benchmarked choices are timed (``site_timing.py``: pipelined, launch, cudagraph; on the CPU, beside a
reference, ``beside_reference.py``, unless ``launch``); ``site_defer``: timed
when Inductor schedules rather than where it lowers the site.
"""

from __future__ import annotations

from typing import Any

from tuner.backend.context import CompileContext
from tuner.backend.hooks import epilogue, templates
from tuner.backend.instrument.recorder import Recorder
from tuner.core import Forcing, Kind
from tuner.keys import task_key
from tuner.kinds import GRAPH_HOOK, adapted, graph_knobs_kind
from tuner.nearest import Nearest


class MeasuringContext(CompileContext):
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
        super().__init__(forcing, device_type, nearest, cuda_graphs)
        self.recorder = recorder
        self.benchmark = benchmark or {}
        self.kernel_sink = kernel_sink
        self.site_timing = site_timing
        self.site_defer = site_defer
        self.timings: dict[str, dict[str, float]] = {}
        self.pruned: dict[str, dict[str, float]] = {}  # {site key: {choice id: probe ms}}: stopped early, slower
        self.met: set[str] = set()  # the keys of the sites this compile selected at (a site it never met is not here)
        self._listed: dict[str, list[str]] = {}  # {site key: every config id listed}, while the site is lowered

    # --- template sites -----------------------------------------------------------------------------------------
    def site_wants(self, key: str, payload: dict[str, Any]) -> tuple[str, ...]:
        """The ones to benchmark, else the forced (or transferred) one."""
        if key in self.benchmark:
            return tuple(self.benchmark[key])
        return super().site_wants(key, payload)

    def site_listed(self, key: str, ids: list[str]) -> None:
        """Kept for the recording: it records every config Inductor listed, rendered or not."""
        if self.recorder is not None:
            self._listed.setdefault(key, []).extend(ids)

    def trims_conv(self) -> bool:
        return self.recorder is None and not self.benchmark and super().trims_conv()

    def select_site(
        self, payload: dict[str, Any], ids: list[str], default: int, scalars: dict[str, Any] | None = None
    ) -> list[int]:
        """The benchmarked set where this site is benchmarked, else the one answer."""
        key = task_key(Kind.SITE, payload)
        self.met.add(key)
        if self.recorder is not None:
            full = templates.untrimmed(ids, self._listed.pop(key, []))
            self.recorder.site(key, payload, full, full.index(ids[default]), scalars, epilogue.current_site_epilogue())
        if key in self.benchmark:
            picked = list(dict.fromkeys(ids.index(c) for c in self.benchmark[key] if c in ids))
            if len(picked) >= 2:
                return picked
        return super().select_site(payload, ids, default, scalars)

    def record_timings(self, payload: dict[str, Any], timings: dict[str, float]) -> None:
        self.timings.setdefault(task_key(Kind.SITE, payload), {}).update(timings)

    def record_pruned(self, key: str, choice: str, ms: float) -> None:
        self.pruned.setdefault(key, {})[choice] = ms

    def benchmarking(self, payload: dict[str, Any], picks: list[Any], ids: list[str]) -> None:
        """Retime the choices (``retimes_sites``) and probe each before its full timing (``prunes_sites``)."""
        from tuner.backend.instrument import site_timing

        if self.retimes_sites:
            for c in picks:
                site_timing.retime(c, self.retimes_sites)
        elif self.times_beside_reference:
            from tuner.backend.instrument.beside_reference import beside_reference

            beside_reference(picks)
        if self.prunes_sites:  # the default first, then candidates, each probed before its full timing
            key = task_key(Kind.SITE, payload)
            site_timing.prune_slow(picks, ids, lambda cid, ms: self.record_pruned(key, cid, ms))

    @property
    def prunes_sites(self) -> bool:
        """Whether a benchmarked site's candidates stop after a probe when clearly slower (``site_timing``): on CUDA
        only. On the CPU a CPP GEMM choice's probe (a Python call of its benchmark function) measured 1000x its
        kernel's time at an mlp's 16x64 site, which no floor separates from a slow kernel; CPU sites offer two or three
        choices, so there is little to save."""
        return self.device_type == "cuda" and bool(self.benchmark)

    @property
    def retimes_sites(self) -> str | None:
        """How this compile's benchmarked CUDA site choices are timed in place of Inductor's way (``site_timing``
        ``TIMERS``), or None: Inductor's own timing (``launch``, the CPU, a compile that benchmarks nothing)."""
        on = self.site_timing != "launch" and self.device_type == "cuda" and bool(self.benchmark)
        return self.site_timing if on else None

    @property
    def times_beside_reference(self) -> bool:
        """Whether this compile's benchmarked CPU site choices are each timed beside the site's first ATen choice,
        interleaved (``beside_reference.py``), in place of Inductor's one-after-another windows (``launch``: those)."""
        return self.device_type == "cpu" and self.site_timing != "launch" and bool(self.benchmark)

    @property
    def defers_sites(self) -> bool:
        """Whether a benchmarked CUDA site's choices are timed when Inductor schedules, not where it lowers the site
        (``hooks/selector``): their compiles then overlap the rest of the lowering instead of waiting site by site."""
        return self.site_defer and self.device_type == "cuda" and bool(self.benchmark)

    @property
    def builds_choices(self) -> bool:
        return super().builds_choices or bool(self.benchmark)

    @property
    def wants_choices_hook(self) -> bool:
        return self.recorder is not None or super().wants_choices_hook

    # --- graphs, fusions, kernels -------------------------------------------------------------------------------
    def restarting(self, patches: dict[str, Any]) -> None:
        """The graph just met is compiled again (``hooks/restart``): the recording keeps only the graph it becomes."""
        super().restarting(patches)
        if self.recorder is not None:
            self.recorder.forget_current()

    def graph_met(self, payload: dict[str, Any], keys: dict[str, str]) -> None:
        """Record the graph, keyed by its codegen knobs' task (its fusion grouping's beside)."""
        if self.recorder is not None:
            self._listed.clear()  # a site's lists are read as it is lowered; one listed under other inputs is never read
            kind = graph_knobs_kind(self.device_type) or ""
            key, fkey = (keys.get(k) or task_key(k, payload) for k in (kind, Kind.FUSION))
            self.recorder.graph(key, kind, payload, fkey, self.device_type, keys)

    def lowering(self, gm: Any, is_backward: bool) -> None:
        """The graph about to be lowered: whether it is compiled frozen, what each graph-hooked kind's adapter finds in
        it (a forward-only kind's: in a forward) and where each graph rewrite applies."""
        from tuner.backend.hooks import restart, rewrites

        if self.recorder is not None:
            found = {
                k.value: a.found(gm)
                for k, a in adapted(self.device_type, GRAPH_HOOK)
                if hasattr(a, "found") and not (k.forward_only and is_backward)
            }
            self.recorder.lowering(restart.frozen_now(is_backward), found, rewrites.found_in(gm))

    @property
    def watches_fusions(self) -> bool:
        return self.recorder is not None or super().watches_fusions

    def fusion_allowed(self, pid: str, score: int) -> bool:
        if self.recorder is not None:
            self.recorder.fusion_pair(pid, score)
        return super().fusion_allowed(pid, score)

    def fusion_refused_unshared(self, pid: str) -> None:
        if self.recorder is not None:
            self.recorder.unshared_epilogue(pid)

    def kernels_built(self, kernels: list[Any]) -> None:
        from tuner.backend.instrument.capture import capture_first_call

        if self.kernel_sink is not None:
            self.kernel_sink.extend(capture_first_call(kernels))

    @property
    def fresh_kernels(self) -> bool:
        return super().fresh_kernels or self.kernel_sink is not None


__all__ = ["MeasuringContext"]
