"""``tuner bench``: eager vs Inductor's modes vs tuned, compiled and timed in one process, one run.

Each mode compiles a fresh copy of the model with its own, empty Inductor cache folder (and the in-memory
code cache cleared), so no mode's compile helps another's. Latency is the median per-call time over
interleaved rounds (A B C … then … C B A) with rotated inputs; every mode's output is checked against eager.
"""

from __future__ import annotations

import copy
import datetime as dt
import sys
import time
from dataclasses import dataclass
from typing import Any

from tuner.kinds import descriptor, groups, where
from tuner.search_spaces.fusion import REWRITE_KNOBS, rewrite_knobs
from tuner.errors import TunerError
from tuner.measure.numerics import eager_errors, gross, tensor_errors, tolerance_for, widened_by_default, within
from tuner.backend.instrument.timing import interleaved, pooled
from tuner.workloads.steps import eager_reference, optimizer_for, optimizer_name, run_step, synchronizer
from tuner.workloads.spec import WorkloadSpec, build_model, check_device, make_inputs


CUDA_GRAPH_MODES = ("max-autotune", "reduce-overhead")  # Inductor's modes that run a CUDA device's graphs under CUDA graphs


@dataclass(frozen=True)
class Mode:
    backend: str | None  # None: eager
    inductor_mode: str | None = None
    freezing: bool = False
    options: tuple[tuple[str, Any], ...] = ()

    def describe(self, device: str) -> dict[str, Any]:
        """What a reader needs to tell the anchors apart: backend, Inductor mode, freezing, CUDA graphs (for a tuned
        mode, whether its database may turn them on; the run records whether it did)."""
        mode = self.inductor_mode or dict(self.options).get("mode")
        if self.backend == "tuned":
            graphs = dict(self.options).get("cuda_graphs", True) or mode in CUDA_GRAPH_MODES
        else:
            graphs = mode in CUDA_GRAPH_MODES
        return {"backend": self.backend or "eager", "inductor_mode": mode, "freezing": self.freezing,
                "cuda_graphs": bool(graphs) and device == "cuda"}


def modes_for(spec: WorkloadSpec, db_url: str, extra_dbs: dict[str, str] | None = None) -> dict[str, Mode]:
    """``extra_dbs``: {label: url}, each benchmarked as mode ``tuned-LABEL``."""
    freeze = spec.mode == "infer"

    def tuned(*options: tuple[str, Any], url: str = db_url) -> Mode:
        return Mode("tuned", None, freeze and spec.freezing, (("db", url), *options))

    return {
        "eager": Mode(None),
        "default": Mode("inductor"),
        "max-autotune-no-cudagraphs": Mode("inductor", "max-autotune-no-cudagraphs"),
        "max-autotune": Mode("inductor", "max-autotune"),  # with CUDA graphs
        "reduce-overhead": Mode("inductor", "reduce-overhead"),  # CUDA graphs, Inductor's default kernels
        "tuned-reduce-overhead": tuned(("mode", "reduce-overhead")),
        "freezing": Mode("inductor", None, freeze),  # Inductor's defaults on the frozen graph: what tuned starts from
        # Inductor at its strongest: freezing and max-autotune, which runs a CUDA device's graphs under CUDA graphs
        "freezing-max-autotune": Mode("inductor", "max-autotune", freeze),
        "freezing-max-autotune-no-cudagraphs": Mode("inductor", "max-autotune-no-cudagraphs", freeze),
        "freezing-reduce-overhead": Mode("inductor", "reduce-overhead", freeze),  # Inductor's default kernels, CUDA graphs
        "tuned": tuned(),
        "tuned-kernels": tuned(("fusion", False)),
        "tuned-no-kernels": tuned(("kernels", False)),
        "tuned-no-cuda-graphs": tuned(("cuda_graphs", False)),  # every winner, never under CUDA graphs
        "tuned-strict": tuned(("transfer", False)),
        **{f"tuned-{label}": tuned(url=url) for label, url in (extra_dbs or {}).items()},
        # one lever left to Inductor: every winner group, every kind (``tuner.kinds``) and every rewrite of the
        # groupings (``search_spaces/fusion.py``), as ``tuned-without-NAME``
        **{f"tuned-without-{name}": tuned(("without", (name,))) for name in [*groups(), *where(), *REWRITE_KNOBS]},
    }


def with_anchors(device: str, names: list[str]) -> list[str]:
    """``names``, and on a CUDA device, where Inductor's strongest mode is among them, its default kernels frozen
    under CUDA graphs too: a compile as cheap as the default's, and at times faster than max-autotune's choices, so
    that no tuned figure is a win over max-autotune's kernels that CUDA graphs alone would give."""
    if device != "cuda" or "freezing-max-autotune" not in names or "freezing-reduce-overhead" in names:
        return names
    at = names.index("freezing-max-autotune")
    return [*names[:at], "freezing-reduce-overhead", *names[at:]]


def ablated_modes(results: dict[str, Any]) -> list[str]:
    """The modes of ``results`` that leave one lever out of tuned."""
    return [n for n in results if n.startswith("tuned-without-") or n == "tuned-no-cuda-graphs"]


def ablation(device: str, rewrites: list[str] | None = None) -> list[str]:
    """``tuned`` and one mode per lever that can answer on ``device``: each winner group, each rewrite of the groupings
    (``rewrites``: those a database's groupings turn on; None: every one this device offers) and CUDA graphs on a
    GPU."""
    rewrites = rewrite_knobs(device) if rewrites is None else rewrites
    levers = [g for g, kinds in groups().items() if any(device in descriptor(k).devices for k in kinds)] + rewrites
    return ["tuned", *[f"tuned-without-{g}" for g in levers], *(["tuned-no-cuda-graphs"] if device == "cuda" else [])]


def stored_rewrites(db_url: str, device: str) -> list[str]:
    """The rewrite knobs that some grouping stored in ``db_url`` for this device turns on."""
    from tuner.backend.answers import load_answers
    from tuner.core import Kind

    forcing, _ = load_answers([db_url], device)
    return [k for k in rewrite_knobs(device) if any(answer.get(k) for answer in forcing.of(Kind.FUSION).values())]


def compile_mode(spec: WorkloadSpec, m: Mode, model: Any, example: Any) -> tuple[Any, Any, float]:
    """(the compiled copy of ``model``, its first step's output, the seconds that step took: the compile)."""
    import torch

    from tuner.backend.compiler import isolated_compile
    from tuner.backend.process import inductor_options

    with isolated_compile(m.freezing):
        kw: dict[str, Any] = {"backend": m.backend}
        if m.backend == "inductor" and m.freezing:  # in its options, so Dynamo does not serve the unfrozen compile
            kw["options"] = inductor_options(m.inductor_mode, freezing=True)
        elif m.inductor_mode:
            kw["mode"] = m.inductor_mode
        if m.options:
            kw["options"] = dict(m.options)
        fn = torch.compile(copy.deepcopy(model), **kw)
        t0 = time.perf_counter()
        out = run_step(spec.mode, fn, example, grads=True, amp=spec.amp)
        synchronizer(spec.device)()
        return fn, out, time.perf_counter() - t0


def _command() -> str:
    argv = list(sys.argv)
    if argv and (argv[0].endswith("tuner") or argv[0].endswith("__main__.py")):
        argv[0] = "tuner"
    return " ".join(argv)


MODEL_LIBRARIES = ("torchvision", "transformers", "timm")


def _versions() -> dict[str, Any]:
    """torch's and Triton's versions, and those of the model libraries installed (a model's code, and so its graph,
    changes with them: a Transformers release changed how BERT's attention mask reaches SDPA)."""
    from importlib import metadata

    import torch

    from tuner.db.fingerprint import _triton_version

    libraries = {}
    for name in MODEL_LIBRARIES:
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"torch": torch.__version__, "triton": _triton_version(), "libraries": libraries}


def provenance(device_kind: str) -> dict[str, Any]:
    """Where and how a result was measured: device, versions, date and command (what a bench's JSON carries)."""
    from tuner.db import current_device

    dev = current_device(device_kind)
    return {
        "device": dev.name,
        "device_kind": device_kind,
        "device_info": dev.info,
        **_versions(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": _command(),
    }


# Compiled instances of each mode on the CPU: two compiles of one config, each of a fresh copy of the model, can run
# 5-10% apart there for good (their weights and buffers sit elsewhere), and with one instance a mode a small decode
# step's tuned mode read 1.06x slower than the same winners did over three instances each, where it was 0.93x.
CPU_INSTANCES = 3


def instances_for(device: str, instances: int | None = None) -> int:
    """How many times each mode is compiled: ``instances``, else :data:`CPU_INSTANCES` on the CPU and one on a GPU
    (where a max-autotune compile takes minutes)."""
    return instances or (CPU_INSTANCES if device == "cpu" else 1)


def run_bench(
    spec: WorkloadSpec, mode_names: list[str], db_url: str, *, rounds: int = 30, min_sample_ms: float = 25.0,
    progress: Any = None, extra_dbs: dict[str, str] | None = None, checkpoint: Any = None, instances: int | None = None,
) -> dict[str, Any]:
    """Compile every mode (``instances_for`` times, each of a fresh copy of the model), then time them all in
    interleaved rounds; a mode's time is the median of its instances' medians. ``checkpoint``, if given, gets the
    document as it stands after each mode's compile (``"partial": true``, no timings yet), so a run stopped before its
    timing still leaves the compile times it measured. Each tuned mode is set against the best Inductor mode of the run."""
    table = modes_for(spec, db_url, extra_dbs)
    unknown = [m for m in mode_names if m not in table]
    if unknown:
        raise TunerError(f"unknown mode(s) {unknown}; choose from {', '.join(table)}")
    check_device(spec)
    from tuner.backend.process import configure_measuring

    configure_measuring(spec.threads, spec.uses_freezing, sweep=False)
    model = build_model(spec)
    inputs = make_inputs(spec)
    ref = eager_reference(spec, model, inputs[0])
    tolerance = tolerance_for(spec.dtype, eager_errors(spec.mode, model, inputs[0], ref))  # per tensor
    errors: dict[str, list[float]] = {}
    fns: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    n = instances_for(spec.device, instances)
    for name in mode_names:
        m = table[name]
        if progress:
            progress(f"compiling {name}" + (f" ({n} instances)" if n > 1 else ""))
        for i in range(n):
            fns[(name, i)], record, err = _compiled(spec, m, name, model if i == 0 else copy.deepcopy(model), inputs[0], ref, tolerance)
            results.setdefault(name, record)
            if err is not None and i == 0:
                errors[name] = err
        if progress and m.backend is not None:
            progress(f"{name}: compiled in {results[name]['compile_s']:.1f} s")
        if checkpoint:
            checkpoint({**_document(spec, rounds, copy.deepcopy(results)), "partial": True})
    _check_numerics(results, errors, widened_by_default(tolerance, errors.get("default", [])), progress)
    if progress:
        progress(f"timing {len(mode_names)} modes" + (f" of {n} instances each" if n > 1 else "") + f", {rounds} interleaved rounds")
    steps = {key: _timed_step(spec, f, inputs) for key, f in fns.items()}
    timed = interleaved(steps, rounds=rounds, min_sample_ms=min_sample_ms, sync=synchronizer(spec.device))
    _add_timings(spec, results, {name: pooled([timed[(name, i)] for i in range(n)]) for name in mode_names})
    if n > 1:
        for name in mode_names:
            results[name]["instance_medians_ms"] = [round(timed[(name, i)].median_ms, 4) for i in range(n)]
    return _document(spec, rounds, results)


def _compiled(spec: WorkloadSpec, m: Mode, name: str, model: Any, example: Any, ref: Any, tolerance: Any) -> tuple[Any,
dict[str, Any], list[float] | None]:
    """(the mode's step function, its record so far, its output's errors against eager; None for eager itself).
    A mode whose output is grossly off is refused outright."""
    from tuner.backend import compile_timers, counters
    from tuner.backend.tuned import SWITCHES

    record = m.describe(spec.device)
    if m.backend is None:
        return model, {**record, "compile_s": 0.0}, None
    before, graphs_before, timers = counters.stats(), counters.count("cuda_graph_compiles"), compile_timers.totals()
    fn, out, compile_s = compile_mode(spec, m, model, example)
    after = counters.stats()
    record["compile_regions"] = compile_timers.since(timers)  # where the compile's time went, by Inductor's timers
    if m.backend == "tuned":
        options = dict(m.options)
        record.update({k: v for k, v in options.items() if k in SWITCHES and v is False})  # the options it turned off
        record.update(db=options.get("db"), lookups={k: after[k] - before[k] for k in ("hits", "transferred", "misses")},
                      cuda_graphs=spec.device == "cuda" and counters.count("cuda_graph_compiles") > graphs_before)
    errors = tensor_errors(out, ref)
    err = max(errors, default=0.0)
    if not within(errors, gross(tolerance)):
        raise TunerError(f"mode {name}: output differs from eager (relative error {err:.3g})")
    record.update(rel_error=float(f"{err:.3g}"), compile_s=round(compile_s, 3))
    if m.backend == "tuned":
        record["benchmarks"] = after["benchmarks"] - before["benchmarks"]
    return fn, record, errors


def _check_numerics(results: dict[str, dict[str, Any]], errors: dict[str, list[float]], bound: Any, progress: Any) -> None:
    """Like a sweep: a mode's numerics pass when about as close to eager as Inductor's default compile is."""
    for name, errs in errors.items():
        r = results[name]
        r["numerics_ok"] = within(errs, bound)
        if not r["numerics_ok"] and progress:
            which = " (--ablate times tuned without each lever's answers: the mode whose output holds names the lever)" if r.get("backend") == "tuned" else ""
            progress(f"warning: mode {name} differs from eager by more than its bound (largest error {r['rel_error']:.3g}){which}")


def _add_timings(spec: WorkloadSpec, results: dict[str, dict[str, Any]], timings: dict[str, Any]) -> None:
    batch = spec.shape[0]
    for n, t in timings.items():
        results[n].update(
            median_ms=round(t.median_ms, 4), min_ms=round(t.min_ms, 4), spread_ms=round(t.spread_ms, 4),
            samples=t.samples, img_per_s=round(batch * 1e3 / t.median_ms, 1),
        )
        if spec.mode == "decode":  # one token per sequence per step
            results[n]["tokens_per_s"] = results[n]["img_per_s"]
    eager = results.get("eager", {}).get("median_ms")
    best = best_inductor(results)
    for r in results.values():
        if eager:
            r["speedup_vs_eager"] = round(eager / r["median_ms"], 3)
        if best and r["backend"] == "tuned":
            r["vs_best_inductor"] = round(r["median_ms"] / results[best]["median_ms"], 3)
    lever_worth(results, best)


def lever_worth(results: dict[str, dict[str, Any]], best: str | None) -> None:
    """For each mode that leaves one lever out of tuned: ``vs_tuned``, how much slower tuned runs without it, and,
    where tuned beats the ``best`` Inductor mode, ``share_of_gain``: the part of tuned's lead over that mode the lever
    holds, (without - tuned) / (best - tuned). Levers interact, so the shares need not add up to 1; one below 0 is
    a lever that cost time here."""
    tuned = results.get("tuned", {}).get("median_ms")
    anchor = results[best]["median_ms"] if best else None
    for name in ablated_modes(results) if tuned else ():
        results[name]["vs_tuned"] = round(results[name]["median_ms"] / tuned, 3)
        results[name].pop("share_of_gain", None)
        if anchor and anchor > tuned:
            results[name]["share_of_gain"] = round((results[name]["median_ms"] - tuned) / (anchor - tuned), 3)


def best_inductor(results: dict[str, dict[str, Any]]) -> str | None:
    """The fastest of the run's Inductor modes (the anchor every tuned mode is set against); None before timing or
    with no Inductor mode."""
    timed = [(r["median_ms"], name) for name, r in results.items() if r.get("backend") == "inductor" and r.get("median_ms")]
    return min(timed)[1] if timed else None


def _timed_step(spec: WorkloadSpec, fn: Any, inputs: list[Any]) -> Any:
    """One timed step of ``fn``: the workload's step and, training, its optimizer's step (eager, the same for
    every mode: what a user's training step costs, not only its compiled part)."""
    opt = optimizer_for(spec.mode, spec.model, fn)

    def step(i: int) -> None:
        run_step(spec.mode, fn, inputs[i % len(inputs)], amp=spec.amp)
        if opt is not None:
            opt.step()

    return step


def _document(spec: WorkloadSpec, rounds: int, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    import torch

    return {
        "model": spec.model,
        **({"best_inductor": best} if (best := best_inductor(results)) else {}),
        **provenance(spec.device),
        "dtype": spec.dtype,
        "batch": spec.shape[0],
        "input_shape": list(spec.shape),
        "mode": spec.mode,
        **({"optimizer": optimizer_name(spec.mode, spec.model)} if spec.mode == "train" else {}),
        "channels_last": spec.channels_last,
        "threads": torch.get_num_threads(),
        "rounds": rounds,
        "results": results,
    }


def plot(result: dict[str, Any], path: str) -> bool:
    """A bar chart of median latency per mode; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = list(result["results"])
    values = [result["results"][n]["median_ms"] for n in names]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    bars = ax.bar(names, values, color=["#999" if n == "eager" else "#dd8452" if n.startswith("tuned") else "#4c72b0" for n in names])
    ax.bar_label(bars, labels=[f"{v:.3g}" for v in values])
    ax.set_ylabel("median latency (ms)")
    ax.set_title(f"{result['model']} {result['mode']} {result['dtype']} b{result['batch']} on {result['device']}", fontsize=9)
    plt.setp(ax.get_xticklabels(), rotation=15, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
