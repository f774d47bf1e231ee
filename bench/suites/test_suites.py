"""Latency (eager / Inductor default / tuned), warm-database compile time, lookup overhead, export/import rate."""

from __future__ import annotations

import copy

import pytest
import torch

from bench.suites.conftest import GPU_WORKLOADS, WORKLOADS, Workload

MODES = ("eager", "default", "tuned")
ALL = [*WORKLOADS, *(pytest.param(w, marks=pytest.mark.gpu) for w in GPU_WORKLOADS)]


def _model_and_input(w: Workload):
    from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

    spec = WorkloadSpec(model=w.model, device=w.device, input_shape=w.shape, threads=2)
    return spec, build_model(spec), make_inputs(spec, sets=1)[0]


def _compiled(w: Workload, mode: str, url: str):
    from tuner.backend.compiler import isolated_compile
    from tuner.backend.process import configure_measuring

    spec, model, x = _model_and_input(w)
    configure_measuring(spec.threads, spec.uses_freezing, sweep=False)
    if mode == "eager":
        return model, x
    torch._dynamo.reset()
    with isolated_compile(spec.uses_freezing), torch.no_grad():
        kw = {"backend": "tuned", "options": {"db": url}} if mode == "tuned" else {"backend": "inductor"}
        fn = torch.compile(copy.deepcopy(model), **kw)
        fn(x)  # the compile, outside the timing
    return fn, x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("w", ALL, ids=lambda w: w.name)
def test_latency(benchmark, swept, w, mode):
    import tuner.backend as tb

    url = swept(w)
    tb.reset_stats()
    fn, x = _compiled(w, mode, url)
    if mode == "tuned":
        s = tb.stats()
        assert s["benchmarks"] == 0 and s["hits"] > 0, s
        benchmark.extra_info.update(s)
    benchmark.group = f"latency {w.name}"
    sync = torch.cuda.synchronize if w.device == "cuda" else (lambda: None)

    def step():
        with torch.no_grad():
            fn(x)
        sync()

    benchmark.pedantic(step, warmup_rounds=5, rounds=50, iterations=5)


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: w.name)
def test_warm_database_compile(benchmark, swept, w):
    """torch.compile with backend="tuned" on a warm database, Inductor's caches empty: the whole first call."""
    url = swept(w)
    benchmark.group = "warm-database compile"
    benchmark.pedantic(lambda: _compiled(w, "tuned", url), rounds=3, iterations=1)


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: w.name)
def test_lookup_overhead_per_compile(benchmark, swept, w):
    """What the backend adds to each compile before Inductor runs, the database already read once: its revision check
    and indexing the winners."""
    from tuner.backend.answers import load_answers

    url = swept(w)
    benchmark.group = "lookup per compile"
    forcing, _ = benchmark(load_answers, [url], w.device)
    assert forcing.answers, "the swept database answers nothing"


def test_export_and_import_rows_per_second(benchmark, swept, tmp_path):
    """A portable file written from the swept database and read, validated and applied into a new one."""
    from tuner.db import Database
    from tuner.db.export import export_records, write_export
    from tuner.db.transfer import apply_import, known_tasks, read_import

    src = Database.open(swept(WORKLOADS[2]))
    runs = iter(range(10**6))
    rows: dict[str, int] = {}

    def round_trip():
        i = next(runs)
        path = tmp_path / f"x{i}.jsonl.gz"
        rows.update(write_export(export_records(src), path))
        dst = Database.open(f"sqlite:///{tmp_path / f'y{i}.db'}")
        apply_import(dst, read_import(path, known_tasks(dst)))
        dst.close()

    benchmark.group = "export / import"
    benchmark.pedantic(round_trip, rounds=3, iterations=1)
    total = sum(rows.values())
    assert total > 0, "the export wrote no rows"
    if benchmark.stats is not None:  # None where the run is a smoke run (--benchmark-disable)
        benchmark.extra_info.update(rows=total, rows_per_s=round(total / benchmark.stats.stats.median, 1))
    src.close()
