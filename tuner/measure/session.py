"""Inside a worker process: one workload built once, compiled under different forcings, timed.

Every candidate is compiled into its own copy of the model (distinct backend objects, so
Dynamo keeps them apart) and timed against its baseline in the same process, interleaved.
"""

from __future__ import annotations

import collections
import copy
import math
import statistics
import time
import dataclasses
from dataclasses import asdict
from typing import Any

from tuner.measure.affinity import available_cores
from tuner.measure.classify import CompileFailed, Inaccurate, classify, describe
from tuner.core import Forcing
from tuner.measure import quiet
from tuner.measure.jobs import AttentionAlone, CaptureGraphs, CaptureKernels, GraphReplay, GraphTrial, Job, KernelBatch, SiteBatch
from tuner.measure.numerics import (
    TOLERANCE, eager_errors, gross, tensor_errors, tolerance_for, widened_by_default, within, worst_excess,
)
from tuner.measure.result import AttentionTimings, CaptureResult, CompiledCopy, Instances, KernelResults, Measurement, Recording, SiteTimings, Status
from tuner.backend.instrument.timing import interleaved, pooled
from tuner.workloads.steps import run_step, synchronizer
from tuner.workloads.spec import WorkloadSpec, build_model, check_device, make_inputs


# CompiledCopy instances of one config beside the capture's, timed to measure the spread between instances (CPU). Each
# instance's weights and buffers sit at addresses of their own, and instances of one compile can differ by more than
# the spread of any one instance's timing: a candidate could otherwise "win" over the capture's instance alone.
INSTANCES = 2


class Session:
    def __init__(self, spec: WorkloadSpec, cache_size: int = 3, base: dict[str, Any] | None = None,
                 instance_spread_ms: float | None = None, instances_by: float | None = None):
        import torch

        self.spec = spec
        # How far compiled instances of one config differ here (CPU; measured by the first capture, handed to a
        # restarted worker): every whole-workload timing's spread is at least this (``time_graph``). No instance
        # compile starts where it is expected to end past ``instances_by`` (``time.monotonic()``; a time budget's)
        self.instance_spread_ms = instance_spread_ms
        self.instances_by = instances_by
        # Answers every compile of this session forces beneath its own: the workload as it is tuned (a frozen graph's
        # answer to compile unfrozen, say, which Dynamo's trace with freezing on must precede: the graph it compiles
        # again is the one a user's compile runs).
        self.base = base or {}
        clock = _Parts()
        check_device(spec)
        from tuner.backend.process import configure_measuring

        configure_measuring(spec.threads, spec.uses_freezing, sweep=True)  # see _backend: sweeps leave no cache entries
        if spec.device == "cuda":
            from tuner.backend.process import warm_compile_workers

            warm_compile_workers()  # they start while the model is built
        clock.done("Inductor setup")
        self.torch = torch
        self.model = build_model(spec)
        self.inputs = make_inputs(spec)
        clock.done("model build")
        self._sync = synchronizer(spec.device)
        # Timing windows exclude every other tuner process's timing on this device and, on the CPU, its compiles too.
        self._lock = quiet.device_lock(spec.device, torch.cuda.current_device() if spec.device == "cuda" else 0)
        self.reference = self._run(self.model, 0, grads=True)
        self.eager_errors = eager_errors(spec.mode, self.model, self.inputs[0], self.reference)
        self.eager_error = max(self.eager_errors, default=0.0)
        clock.done("eager reference")
        self.start_costs = clock.parts  # what building this session cost, item by item (the capture's cost line)
        self.tolerance = tolerance_for(spec.dtype, self.eager_errors)  # per tensor
        self.default_error = float("nan")  # set by capture()
        self._compiled: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._defaults: CompiledCopy | None = None  # the capture's compile: Inductor's defaults, the whole check's baseline
        self._cache_size = cache_size
        self.kernels: Any = None
        self._default_kernels: list[Any] | None = None  # the kernels of the capture compile (CUDA)
        if spec.device == "cuda":
            from tuner.measure.kernels import KernelBench

            self.kernels = KernelBench(torch.cuda.current_device(), TOLERANCE[spec.dtype])

    # --- running the workload -------------------------------------------------------------
    def _run(self, fn: Any, i: int, grads: bool = False) -> Any:
        return run_step(self.spec.mode, fn, self.inputs[i % len(self.inputs)], grads=grads, amp=self.spec.amp)

    def _step(self, fn: Any) -> Any:
        return lambda i: self._run(fn, i)

    def eager_ms(self, rounds: int = 5) -> float:
        with quiet.timing(device=self._lock):
            return interleaved({"eager": self._step(self.model)}, rounds=rounds, min_sample_ms=20.0, sync=self._sync)["eager"].median_ms

    # --- compiling ----------------------------------------------------------------------------
    def _backend(self, forcing: dict[str, Any], recorder: Any, benchmark: Any, kernel_sink: Any, cuda_graphs: bool,
                 timing: str | None = None) -> Any:
        from tuner.backend.compiler import compile_with_context
        from tuner.backend.instrument.context import MeasuringContext
        from tuner.core import Forcing
        from tuner.settings import settings

        timing = timing or settings().site_timing
        ctx = MeasuringContext(Forcing.from_json(forcing), self.spec.device, recorder, benchmark, kernel_sink,
                               "pipelined" if timing == "auto" else timing, site_defer=settings().site_defer, cuda_graphs=cuda_graphs)
        # Sweep compiles neither read nor fill Inductor's caches: a user's later compile must do its own lowering.
        # Epilogue fusions are not benchmarked: a site's timings are its choices' own (with ``site_defer`` they are
        # still taken at the scheduler, hooks/selector).
        sweep_patches = {"fx_graph_cache": False, "autotune_local_cache": False, "benchmark_epilogue_fusion": False}

        def backend(gm: Any, example_inputs: Any, **_: Any) -> Any:
            return compile_with_context(gm, example_inputs, ctx, sweep_patches)

        backend.context = ctx  # type: ignore[attr-defined]  # read back by compile() for the site timings
        return backend

    def compile(self, forcing: dict[str, Any], recorder: Any = None, benchmark: Any = None, kernel_sink: Any = None, check: bool = True,
                timing: str | None = None, anew: bool = False) -> CompiledCopy:
        """Compile a fresh copy under ``forcing``, run it once and check its numerics (unless ``check`` is off).
        Raises :class:`CompileFailed` when the compile or its first run fails, :class:`Inaccurate` when the
        numerics are off. With ``benchmark``, the sites' timings come back on the result, timed the ``timing`` way.
        ``anew``: another instance, where one of ``forcing`` is kept already; it is not kept."""
        from tuner.keys import digest

        fresh = recorder is not None or benchmark is not None or kernel_sink is not None
        reuse = not fresh and not anew
        if reuse and self._defaults is not None and Forcing.from_json(forcing) == Forcing():
            return dataclasses.replace(self._defaults, compile_s=0.0)
        forcing = Forcing.from_json(self.base).merged(Forcing.from_json(forcing)).to_json() if self.base else forcing
        key = digest(forcing)
        if key in self._compiled and reuse:
            self._compiled.move_to_end(key)
            return dataclasses.replace(self._compiled[key], compile_s=0.0)
        # A compile that records, times sites or captures kernels (a fresh one) never runs under CUDA graphs: its
        # kernels are the same, and a graph tree's pool cannot hold the tensors those keep (not tracked as outputs).
        backend = self._backend(forcing, recorder, benchmark, kernel_sink, cuda_graphs=not fresh, timing=timing)
        fn = self.torch.compile(copy.deepcopy(self.model), backend=backend)
        window = quiet.timing if benchmark is not None else quiet.compiling  # a site batch times while it compiles
        t0 = time.perf_counter()
        try:
            with window(benchmark is not None or self._lock == "cpu", device=self._lock):
                out = self._run(fn, 0, grads=True)
                self._sync()
        except Exception as e:
            raise CompileFailed(describe(e)) from e
        if kernel_sink is not None:
            from tuner.backend.instrument.capture import stop_counting

            stop_counting(kernel_sink)  # its kernels' launches per step are counted
        errors = tensor_errors(out, self.reference)
        ctx = backend.context
        done = CompiledCopy(fn, time.perf_counter() - t0, max(errors, default=0.0), ctx.timings, ctx.pruned, errors, frozenset(ctx.met))
        if check and not within(errors, self.tolerance):
            err, bound = worst_excess(errors, self.tolerance)
            raise Inaccurate(
                f"relative error {err:.3g} exceeds {bound:.3g} for {self.spec.dtype} "
                f"(eager is {self.eager_error:.2g} from float64; Inductor's default {self.default_error:.2g} from eager)"
            )
        if reuse:
            self._compiled[key] = done
            while len(self._compiled) > self._cache_size:
                self._compiled.popitem(last=False)
        return done

    # --- the two jobs -------------------------------------------------------------------------
    def capture(self) -> CaptureResult:
        """Compile with Inductor's defaults in record mode; report graphs, sites and graph breaks."""
        from torch._dynamo.utils import counters

        from tuner.backend.instrument.recorder import Recorder
        from tuner.db.fingerprint import current_device, current_environment

        counters.clear()
        recorder = Recorder()
        sink: list[Any] | None = [] if self.kernels is not None else None
        clock = _Parts()
        done = self.compile({}, recorder, kernel_sink=sink, check=False)
        clock.done("default compile")
        self._default_kernels = sink  # Inductor's default kernels: a capture with nothing forced needs no compile
        # Recording forces nothing: this is the compile of Inductor's defaults, kept as every later trial's baseline
        # (a training step's too: the optimizer's step is eager, outside what is compiled and timed)
        self._defaults = done
        # Candidates must be about as close to eager as Inductor's own default is: a training step's small
        # gradients (batch-norm biases, say) can differ from eager by more than the dtype's bound, by default.
        gate = gross(self.tolerance)  # not yet widened by the default: this is the default
        if not within(done.errors, gate):
            err, _ = worst_excess(done.errors, gate)
            raise Inaccurate(f"Inductor's default compile of this workload differs from eager by {err:.3g}")
        self.default_error = done.error
        self.tolerance = widened_by_default(self.tolerance, done.errors)
        breaks = {str(k): int(v) for k, v in counters["graph_break"].items()}
        step_ms, busy_ms, library, in_step = self._busy(done.fn) if self.spec.device == "cuda" else (None, None, [], {})
        clock.done("step profile")
        eager_ms = self.eager_ms()
        clock.done("eager timing")
        instances = self._instances(done.compile_s) if self.spec.device == "cpu" and self.instance_spread_ms is None else None
        clock.done("instances")
        kernels = [{**k, "device_ms": in_step.get(k["name"])} for k in self.kernels.register(sink)] if sink is not None else []
        clock.done("kernel timings")
        return CaptureResult(
            graphs=[asdict(g) for g in recorder.graphs.values()],
            sites=[asdict(s) for s in recorder.sites.values()],
            graph_breaks=breaks,
            device=asdict(current_device(self.spec.device)),
            environment=asdict(current_environment()),
            compile_s=done.compile_s,
            eager_ms=eager_ms,
            kernels=kernels,
            cores=available_cores(),
            step_ms=step_ms,
            busy_ms=busy_ms,
            library=library,
            costs={**self.start_costs, **clock.parts},
            instances=instances,
        )

    def _instances(self, cold_s: float) -> Instances | None:
        """Up to :data:`INSTANCES` more compiles of the capture's config, each of a fresh copy of the model, timed
        interleaved with the capture's compile: the spread of their medians becomes :attr:`instance_spread_ms`. One is
        expected to take half the capture's (``cold_s``) compile, then as long as the one before; none starts that
        would end past :attr:`instances_by`. None where none was compiled, or one failed (said in the log): the
        timings' own spreads are then the noise."""
        fns, seconds = {"capture": self._step(self._defaults.fn)}, []
        try:
            for i in range(INSTANCES):
                if self.instances_by is not None and time.monotonic() + (seconds[-1] if seconds else cold_s / 2) > self.instances_by:
                    break
                again = self.compile({}, anew=True)
                seconds.append(again.compile_s)
                fns[f"instance {i + 1}"] = self._step(again.fn)
            if not seconds:
                return None
            with quiet.timing(device=self._lock):
                t = interleaved(fns, rounds=GraphTrial.rounds, min_sample_ms=GraphTrial.min_sample_ms, sync=self._sync)
        except Exception as e:  # noqa: BLE001 - the measurement of noise is not the workload's
            print(f"tuner: compiled instances were not timed: {describe(e)}", flush=True)
            return None
        medians = [v.median_ms for v in t.values()]
        self.instance_spread_ms = max(medians) - min(medians)
        return Instances(self.instance_spread_ms, t["capture"].median_ms, statistics.median(seconds))

    def _busy(self, fn: Any) -> tuple[float, float | None, list[dict[str, Any]], dict[str, float]]:
        """The compiled step's wall time, the device's busy time in it (ms), its library calls' device times and its
        Triton kernels' device times a launch (``busy.kernel_ms``)."""
        from tuner.measure.busy import device_ms, library_ops

        step = self._step(fn)
        wall = interleaved({"step": step}, rounds=5, min_sample_ms=20.0, sync=self._sync)["step"].median_ms
        busy, per_kernel = device_ms(step, self._sync)
        return wall, busy, library_ops(step, self._sync), per_kernel

    def run(self, job: Job) -> Any:
        """Do ``job``'s work here, in the worker: the session's method for the job's type."""
        work = {GraphTrial: self.time_graph, GraphReplay: self.time_replay, SiteBatch: self.time_sites,
                AttentionAlone: self.time_attention, KernelBatch: self.time_kernel,
                CaptureKernels: lambda j: self.capture_kernels(j.forcing),
                CaptureGraphs: lambda j: self.capture_graphs(j.forcing)}
        return work[type(job)](job)

    def capture_kernels(self, forcing: dict[str, Any]) -> list[dict[str, Any]]:
        """Compile under ``forcing`` (the template winners), run once, and register every Triton kernel
        with the real arguments of its first call. Returns the kernels' task records."""
        if self.kernels is None:
            return []
        from tuner.core import Forcing

        if Forcing.from_json(forcing) == Forcing() and self._default_kernels is not None:
            return self.kernels.register(self._default_kernels)
        sink: list[Any] = []
        self.compile(forcing, kernel_sink=sink)
        return self.kernels.register(sink)

    def capture_graphs(self, forcing: dict[str, Any]) -> Recording:
        """Compile under ``forcing`` in record mode; the graphs (keys, fusion pairs) and template sites as recorded."""
        from tuner.backend.instrument.recorder import Recorder

        recorder = Recorder()
        self.compile(forcing, recorder)
        return Recording.of(recorder)

    def time_graph(self, job: GraphTrial) -> Measurement:
        """The whole workload under the job's candidate against its baseline, interleaved; with ``job.instances`` of
        each side, each side's timing pooled over its instances (``timing.pooled``), and the spread between instances
        (:attr:`instance_spread_ms`) counted as that of their mean."""
        try:
            base = [self.compile(job.baseline)]
        except Exception as e:  # noqa: BLE001 - classified and stored
            return Measurement(classify(e), error="the baseline itself failed: " + describe(e))
        try:
            cand = [self.compile(job.candidate)]
            alone = cand[0].fn is base[0].fn  # the candidate is the baseline: one side to time
            for _ in range(job.instances - 1):
                cand.append(self.compile(job.candidate, anew=True))
                base += [] if alone else [self.compile(job.baseline, anew=True)]
        except Exception as e:  # noqa: BLE001
            return Measurement(classify(e), error=describe(e))
        fns = {("candidate", i): self._step(c.fn) for i, c in enumerate(cand)}
        if not alone:
            fns.update({("baseline", i): self._step(b.fn) for i, b in enumerate(base)})
        started = time.monotonic()
        try:
            with quiet.timing(device=self._lock):
                t = interleaved(fns, rounds=job.rounds, min_sample_ms=job.min_sample_ms, sync=self._sync)
        except Exception as e:  # noqa: BLE001
            return Measurement(classify(e), error=describe(e))
        sides = {side: pooled([v for (s, _), v in t.items() if s == side]) for side in ("candidate", "baseline") if (side, 0) in t}
        floor = (self.instance_spread_ms or 0.0) / math.sqrt(job.instances)
        return dataclasses.replace(_against(sides, cand[0].compile_s, floor), timing_s=time.monotonic() - started)

    def time_replay(self, job: GraphReplay) -> Measurement:
        """The capture's compile replayed as one CUDA graph by hand (``tuner.measure.replay``) against it launched
        kernel by kernel, interleaved; the replay's output checked against eager first. A step that is not inference
        on CUDA, or whose capture fails, answers with an error (the caller then compiles the workload under CUDA
        graphs)."""
        from tuner.measure.replay import replayed

        if self._defaults is None or self.spec.device != "cuda" or self.spec.mode == "train":
            return Measurement(Status.RUNTIME_ERROR, error="a replay by hand needs the capture's compile of an inference step on CUDA")
        fn = self._defaults.fn
        try:
            call, out = replayed(lambda x: run_step(self.spec.mode, fn, x, amp=self.spec.amp), self.inputs)
            errors = tensor_errors(out, self.reference)
            if not within(errors, self.tolerance):
                err, bound = worst_excess(errors, self.tolerance)
                raise Inaccurate(f"replayed as a CUDA graph, relative error {err:.3g} exceeds {bound:.3g}")
            with quiet.timing(device=self._lock):
                t = interleaved({"candidate": call, "baseline": self._step(fn)}, rounds=job.rounds, min_sample_ms=job.min_sample_ms, sync=self._sync)
        except Exception as e:  # noqa: BLE001 - classified and stored
            return Measurement(classify(e), error=describe(e))
        return _against(t, 0.0)

    def time_sites(self, job: SiteBatch) -> SiteTimings:
        """Kernel level: while one compile lowers the graph, Inductor's benchmarker times the requested
        choices side by side at every requested site."""
        from tuner.backend import counters
        from tuner.backend.instrument.recorder import Recorder
        from tuner.backend.instrument.site_timing import FALLBACK

        before = counters.count(FALLBACK)
        recorder = Recorder() if job.record else None
        try:
            done = self.compile(job.forcing, recorder, benchmark=dict(job.sites), timing=job.timing)
        except Exception as e:  # noqa: BLE001
            return SiteTimings(classify(e), error=describe(e))
        pruned = {k: sorted(v) for k, v in done.pruned.items()}
        return SiteTimings(Status.OK, {k: dict(v) for k, v in done.timings.items()}, compile_s=done.compile_s, pruned=pruned,
                           fallbacks=counters.count(FALLBACK) - before, met=tuple(sorted(done.met)),
                           recording=Recording.of(recorder) if recorder is not None else None)

    def time_attention(self, job: AttentionAlone) -> AttentionTimings:
        """Each attention site's backends timed alone on this worker's device (CUDA), in one timing window."""
        from tuner.backend.instrument.attention_timing import time_backends

        if self.spec.device != "cuda":
            return AttentionTimings(Status.RUNTIME_ERROR, error="attention sites are timed alone on CUDA only")
        try:
            with quiet.timing(device=self._lock):
                return AttentionTimings(Status.OK, {s["site"]: time_backends(s, list(job.backends), front_end=job.front_end) for s in job.sites})
        except Exception as e:  # noqa: BLE001 - classified
            return AttentionTimings(classify(e), error=describe(e))

    def time_kernel(self, job: KernelBatch) -> KernelResults:
        if self.kernels is None:
            return KernelResults(tuple(Measurement(Status.RUNTIME_ERROR, error="kernel tasks need a CUDA workload") for _ in job.configs))
        with quiet.timing(device=self._lock):
            return KernelResults(tuple(self.kernels.measure(job.kernel, list(job.configs), job.rounds)))


def _against(t: dict[str, Any], compile_s: float, floor_ms: float = 0.0) -> Measurement:
    """The candidate's timing against its baseline's, from one interleaved run (no baseline: the candidate is it);
    each side's spread at least ``floor_ms`` (the spread between compiled instances)."""
    c = t["candidate"]
    b = t.get("baseline", c)
    return Measurement(Status.OK, c.median_ms, c.min_ms, max(c.spread_ms, floor_ms), b.median_ms, compile_s=compile_s,
                       baseline_spread_ms=max(b.spread_ms, floor_ms))


class _Parts:
    """Seconds per part of a job, each from the end of the one before (a part that did nothing is left out)."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self._t = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        if now - self._t >= 0.05:
            self.parts[name] = round(now - self._t, 2)
        self._t = now
