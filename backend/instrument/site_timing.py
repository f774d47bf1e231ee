"""Hook (b'): how a template site's choices are timed when a sweep benchmarks them (``TUNER_SITE_TIMING``).

``pipelined`` (the default on CUDA): each choice runs a few calls back to back between two events, as the kernels
of a compiled graph follow one another, and its time is the per-call median. The host's time to launch a call then
counts wherever it exceeds the device's, as it does in the model: a library call can cost more host time than device
time, and timed on the device alone (as Inductor's scheduler times a deferred site) it wins sites its Triton rivals
win in the model.

``launch``: Inductor's own timing, each run launched from Python after an L2 flush: a launch that outlasts the
flush shows up, but by how much depends on the flush. ``cudagraph``: replays of a CUDA graph of the choice's calls
back to back, the device's time alone (what a workload run under CUDA graphs pays), each call on its own copy of the
inputs, so that together they outgrow the L2 cache and each call reads them cold, as a model reads its weights
(:func:`rotated`); each choice's run function is made on the capture stream (:func:`_graph_of`). Replayed one call a
graph, a short GEMM times its launch as much as its work; back to back, the calls time what the step pays.

Uses only ``choice.benchmark``, ``choice.bmreq.make_run_fn`` or ``choice.to_callable`` (ChoiceCaller's API on
torch 2.11 through 2.14); a choice that cannot be run so is timed as Inductor would, with a warning.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from tuner.backend import counters, process
from tuner.backend.instrument.pruning import clearly_slower

log = logging.getLogger("tuner.backend")


def run_fn(choice: Any, args: tuple[Any, ...], out: Any) -> Callable[[], Any]:
    """A no-argument function that runs ``choice`` on ``args`` into ``out``, as Inductor's benchmark would."""
    bmreq = getattr(choice, "bmreq", None)
    if bmreq is not None and hasattr(bmreq, "make_run_fn"):
        return bmreq.make_run_fn(*args, out=out)
    algo = choice.to_callable()
    return (
        functools.partial(algo, *args, out=out)
        if getattr(choice, "has_out_variant", True)
        else functools.partial(algo, *args)
    )


def _graph_of(makes: list[Callable[[], Callable[[], Any]]]) -> Any:
    """The run functions ``makes`` build, captured back to back in one CUDA graph after a run on a side stream (what
    capture needs first). They are built on that stream: a Triton choice's run function on torch 2.11 takes the stream
    current when it is made, and one made on the default stream launches outside the capture (an empty graph that
    times ~8 µs whatever the choice: a Qwen2 prefill's 4096x1024x32000 GEMM "ran" 46x faster than cuBLAS). The graph
    holds them, and so the inputs they read: each capture empties the allocator's cache first, so a graph replayed
    after the next one's capture read memory handed back to the driver once its inputs were freed (an illegal memory
    access timing 48 graphs of attention calls on an H100)."""
    import torch

    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fns = [make() for make in makes]
        for fn in fns:
            fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
        for fn in fns:
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph.held = (makes, fns)
    return graph


ROTATE_BYTES = 128 << 20  # the copies of a call's inputs together: beyond an H100/H200's 50-MB L2
MAX_COPIES = 16


def rotated(args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """``args`` and copies of its strided tensors (same sizes, strides and values), enough that their inputs together
    reach :data:`ROTATE_BYTES` (at least 2, at most :data:`MAX_COPIES` sets); any other argument is shared, and so is
    a tensor whose elements share memory (a bias expanded over the rows, stride 0), which no copy of its strides
    holds."""
    import torch

    def dense(a: Any) -> bool:
        return isinstance(a, torch.Tensor) and a.layout == torch.strided

    size = sum(a.numel() * a.element_size() for a in args if dense(a))
    sets = max(2, min(MAX_COPIES, -(-ROTATE_BYTES // max(1, size))))

    def copy(a: Any) -> Any:
        if not dense(a):
            return a
        try:
            return torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device).copy_(a)
        except RuntimeError:  # overlapping elements
            return a

    return [args, *(tuple(copy(a) for a in args) for _ in range(sets - 1))]


def timed_choice(choice: Any) -> Any:
    """The choice whose ``benchmark`` does the timing: a wrapper choice (one that prepares its inputs, then calls its
    ``_wrapped`` choice's ``benchmark``) is timed through the wrapped one."""
    while hasattr(getattr(choice, "_wrapped", None), "benchmark"):
        choice = choice._wrapped
    return choice


def _graph_ms(choice: Any, args: tuple[Any, ...], out: Any) -> float:
    """Per call: the replay of a graph of the choice's calls over :func:`rotated` inputs, over the calls."""
    from torch._inductor.runtime.benchmarking import benchmarker

    sets = rotated(args)
    graph = _graph_of([functools.partial(run_fn, choice, each, out) for each in sets])
    return float(benchmarker.benchmark_gpu(graph.replay)) / len(sets)


def _pipelined(choice: Any, args: tuple[Any, ...], out: Any) -> float:
    return pipelined_ms(run_fn(choice, args, out))


CALLS, SAMPLES = 8, 7  # a pipelined sample: CALLS calls back to back; its time, the median of SAMPLES samples


def pipelined_ms(fn: Callable[[], Any], calls: int = CALLS, samples: int = SAMPLES) -> float:
    """The median per-call time of ``calls`` back-to-back calls of ``fn`` between two CUDA events (``samples``
    samples, after a warm-up): max(host, device) per call, as in a compiled graph's stream."""
    import statistics

    import torch

    fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    return statistics.median(per_call)


# TUNER_SITE_TIMING -> (how a choice is timed, given it, its inputs and its output; the counter each timed choice bumps)
TIMERS: dict[str, tuple[Callable[[Any, tuple[Any, ...], Any], float], str]] = {
    "cudagraph": (_graph_ms, "graph_timed"),
    "pipelined": (_pipelined, "pipelined_timed"),
}


FALLBACK = "timed_as_inductor"  # the counter of choices that could not be timed the asked way


def retime(choice: Any, how: str) -> None:
    """Make ``choice.benchmark`` time its runs the ``how`` way (:data:`TIMERS`; idempotent), through
    :func:`timed_choice`. A choice that cannot be run so is timed as Inductor would, with a warning."""
    choice = timed_choice(choice)
    if getattr(choice, "_tuner_timed", None) == how:
        return
    timer, counter = TIMERS[how]
    launched = choice.benchmark

    def benchmark(*args: Any, out: Any) -> float:
        try:
            ms = timer(choice, args, out)
        except Exception as e:  # noqa: BLE001 - any failure (no GPU, a capture error): time it as Inductor would
            log.warning("cannot time %s %s (%s: %s); timing it as Inductor does", choice, how, type(e).__name__, e)
            counters.bump(FALLBACK)
            return launched(*args, out=out)
        counters.bump(counter)
        return ms

    process.rebind(choice, "benchmark", benchmark)
    choice._tuner_timed = how


# Early exit (tuner.backend.instrument.pruning): a probe here is timed around a Python call, so a candidate must be
# slower than the best by more than PRUNE_FLOOR_MS, well above a launch, so that launch cost alone never prunes.
PRUNE_FLOOR_MS = 0.05
PROBE_RUNS = 3


def _probe_ms(fn: Callable[[], Any], out: Any) -> float:
    """The fastest of a few timed runs of ``fn`` after one warm-up (device-synchronised on CUDA): a host-timed run is
    only ever slowed by what else the host does (the batch's other choices precompile meanwhile)."""
    import time

    import torch

    sync = torch.cuda.synchronize if getattr(getattr(out, "device", None), "type", "cpu") == "cuda" else (lambda: None)
    fn()
    sync()
    runs = []
    for _ in range(PROBE_RUNS):
        t0 = time.perf_counter()
        fn()
        sync()
        runs.append((time.perf_counter() - t0) * 1e3)
    return min(runs)


def confirmed_slower(
    probe_ms: float, again: Callable[[], float], best_ms: float, reference: Callable[[], float], floor_ms: float
) -> bool:
    """Whether a candidate whose probe took ``probe_ms`` is clearly slower than the best choice timed in full so far
    (its probe ``best_ms``), confirmed: a probe that says so is taken again (``again``) beside a fresh probe of that
    best choice (``reference``), and the candidate is slower only if it still is then. A probe times a Python call,
    which the host's other work slows: at gpt2's decode sites (H100) tiles that ran 5 us in full probed at 130-200
    us while the batch precompiled, and were pruned, one faster than the site's default."""
    if not clearly_slower(probe_ms, best_ms, floor_ms):
        return False
    return clearly_slower(min(probe_ms, again()), reference(), floor_ms)


def prune_slow(choices: list[Any], ids: list[str], pruned: Callable[[str, float], None]) -> None:
    """Time a site's choices in order, each probed first: one whose probe is clearly slower than the best probe of a
    choice timed in full so far (``pruning.clearly_slower``, ``PRUNE_FLOOR_MS``), and still is probed again beside it
    (:func:`confirmed_slower`), is reported to ``pruned`` with its probe time, which Inductor then gets as its timing;
    the others are timed in full. Probes are compared with probes, never with Inductor's full timings: a probe times a
    Python call, which on a small CPU kernel costs more than the kernel. A choice whose probe fails is timed in full."""
    best: list[
        tuple[float, Callable[[], float]]
    ] = []  # the probes of the choices timed in full, and how to probe each again
    for choice, cid in zip(choices, ids):
        target = timed_choice(choice)
        full = target.benchmark

        def benchmark(
            *args: Any, out: Any, _full: Callable[..., float] = full, _cid: str = cid, _t: Any = target
        ) -> float:
            try:
                fn = run_fn(_t, args, out)
                probe = _probe_ms(fn, out)
            except Exception:  # noqa: BLE001 - no probe: Inductor's own timing decides
                probe = None
            if probe is not None and best:
                top, again = min(best, key=lambda b: b[0])
                if confirmed_slower(probe, lambda: _probe_ms(fn, out), top, again, PRUNE_FLOOR_MS):
                    counters.bump("pruned")
                    pruned(_cid, probe)
                    return probe
            if probe is not None:
                best.append((probe, lambda: _probe_ms(fn, out)))
            return float(_full(*args, out=out))

        process.rebind(target, "benchmark", benchmark)
