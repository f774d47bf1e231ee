"""The CUDA path for real, on the GPU (``pytest -m gpu`` on the device): kernel capture and measurement,
template rounds, compile-time forcing with zero benchmarks, mode pass-through, crash survival."""

import json
import subprocess
import sys

import pytest

from tuner.workloads.spec import WorkloadSpec

pytestmark = pytest.mark.gpu

CONV = WorkloadSpec(
    model="tests.helpers.models:convnet", device="cuda", dtype="bf16", input_shape=(8, 16, 32, 32), channels_last=True
)


@pytest.fixture(scope="module")
def session():
    import torch._inductor.config as inductor_config

    from tuner.measure.session import Session

    inductor_config.freezing = True
    s = Session(CONV)
    yield s
    inductor_config.freezing = False


def test_capture_finds_sites_and_triton_kernels(session, cwd_root):
    cap = session.capture()
    assert cap.device["kind"] == "cuda"
    assert any(s["op"].startswith("convolution") for s in cap.sites), [s["op"] for s in cap.sites]
    conv = next(s for s in cap.sites if s["op"].startswith("convolution"))
    assert len(conv["choices"]) >= 3 and conv["default"].startswith("aten")
    kernels = session.capture_kernels({})
    kinds = {k["kind"] for k in kernels}
    assert "triton_pointwise" in kinds or "triton_persistent_reduction" in kinds, kinds
    assert all(k["default_ms"] and k["default_ms"] > 0 for k in kernels)
    assert all(
        k["launches"] >= 1 for k in kernels
    )  # launches per captured step: the order of tuning is time x launches


def test_the_default_compiles_kernels_need_no_second_compile(session, monkeypatch):
    """A kernel capture with nothing forced reuses the capture compile's kernels (a compile saved per sweep)."""
    from tuner.core import Forcing

    session.capture()
    monkeypatch.setattr(session, "compile", lambda *a, **k: pytest.fail("compiled again"))
    records = session.capture_kernels(Forcing().to_json())
    assert records and all(r["default_ms"] and r["default_ms"] > 0 for r in records)


def test_lookup_hash_matches_inductors(session):
    from tuner.core import kernel_lookup_hash
    from tuner.backend.hooks import kernels as kh

    session.capture_kernels({})
    for e in session.kernels.entries.values():
        assert kernel_lookup_hash(e.signature) == kh.lookup_hash(e.captured.kernel)


def test_kernel_configs_measured_checked_and_failures_stored(session):
    from tuner.measure.result import Status
    from tuner.search_spaces import space_for

    records = session.capture_kernels({})
    rec = max(records, key=lambda r: r["default_ms"])
    space = space_for(rec["kind"], rec["signature"])
    default = space.default
    other = dict(default, num_warps=8 if default["num_warps"] != 8 else 4)
    bad = dict(default, num_warps=64)  # beyond what a CUDA block can hold: Triton refuses it
    from tuner.measure.jobs import KernelBatch

    ms = list(session.run(KernelBatch(rec["key"], (default, other, bad))).measurements)
    assert ms[0].status is Status.OK and 0.5 < ms[0].ratio < 2.0
    assert ms[1].status is Status.OK and ms[1].median_ms > 0
    assert ms[2].status in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR), ms[2]


def test_kernel_configs_exit_early_after_a_probe(session, monkeypatch):
    """With the rule made to prune everything, a candidate is stopped after its probe (stored as pruned, its probe
    time against the default's); made to prune nothing, it gets the full interleaved timing."""
    import math

    from tuner.backend.instrument import pruning
    from tuner.measure import kernels
    from tuner.measure.jobs import KernelBatch
    from tuner.measure.result import Status
    from tuner.search_spaces import space_for

    records = session.capture_kernels({})
    rec = max(records, key=lambda r: r["default_ms"])
    default = space_for(rec["kind"], rec["signature"]).default
    other = dict(default, num_warps=8 if default["num_warps"] != 8 else 4)
    monkeypatch.setattr(pruning, "PRUNE_FACTOR", 0.0)
    monkeypatch.setattr(pruning, "NOISE_MARGIN", -math.inf)
    monkeypatch.setattr(kernels, "PROBE_FLOOR_MS", -math.inf)
    ms = list(session.run(KernelBatch(rec["key"], (other,))).measurements)
    assert ms[0].status is Status.PRUNED and ms[0].median_ms > 0 and ms[0].baseline_ms > 0, ms[0]
    monkeypatch.setattr(pruning, "PRUNE_FACTOR", math.inf)
    ms = list(session.run(KernelBatch(rec["key"], (other,))).measurements)
    assert ms[0].status is Status.OK, ms[0]


def test_site_batch_times_choices_side_by_side(session):
    from tuner.measure.jobs import SiteBatch
    from tuner.measure.result import Status

    cap = session.capture()
    site = next(s for s in cap.sites if s["op"].startswith("convolution"))
    triton = [c for c in site["choices"] if c != site["default"]][:3]
    r = session.run(SiteBatch({}, {site["key"]: (site["default"], *triton)}))
    assert r.status is Status.OK, r.error
    t = r.timings[site["key"]]
    assert site["default"] in t and all(c in t for c in triton)


def _site_batch_under(session, monkeypatch, var, value):
    """A site batch of an mm or conv site's default and three other choices, run with ``var=value`` set; every
    choice must come back timed. Returns the choices."""
    import math

    from tuner.measure.jobs import SiteBatch
    from tuner.measure.result import Status
    from tuner.settings import settings

    cap = session.capture()
    site = next(s for s in cap.sites if s["op"].startswith("addmm") or s["op"].startswith("convolution"))
    choices = (site["default"], *[c for c in site["choices"] if c != site["default"]][:3])
    monkeypatch.setenv(var, value)
    settings.cache_clear()
    try:
        r = session.run(SiteBatch({}, {site["key"]: choices}))
    finally:
        monkeypatch.delenv(var)
        settings.cache_clear()
    assert r.status is Status.OK, r.error
    t = r.timings[site["key"]]
    assert all(c in t and math.isfinite(t[c]) and t[c] > 0 for c in choices), t
    return choices


@pytest.mark.parametrize("defer", ["0", "1"])
def test_site_batch_timed_at_the_site_or_deferred_to_the_scheduler(session, monkeypatch, defer):
    """TUNER_SITE_DEFER: with 1 (the default) a site's choices become Inductor's deferred selection, timed when it
    schedules; either way every choice is timed, and the sweep's process builds with the compile workers' ptxas."""
    import os
    from pathlib import Path

    import torch

    ptxas = Path(torch.__file__).parent / "bin" / "ptxas"
    if ptxas.exists():
        assert os.environ.get("TRITON_PTXAS_PATH") == str(ptxas)
    _site_batch_under(session, monkeypatch, "TUNER_SITE_DEFER", defer)


@pytest.mark.parametrize("how, counter", [("cudagraph", "graph_timed"), ("pipelined", "pipelined_timed")])
def test_site_batch_timed_our_way(session, monkeypatch, how, counter):
    """TUNER_SITE_TIMING=cudagraph: every benchmarked choice at the site is timed as replays of a CUDA graph;
    pipelined (the default): as back-to-back calls. Deferred to Inductor's scheduler, as a sweep times them."""
    from tuner.backend import counters

    before = counters.count(counter)
    choices = _site_batch_under(session, monkeypatch, "TUNER_SITE_TIMING", how)
    assert counters.count(counter) - before >= len(choices)


def _generated(session):
    """Per template site with a Triton template: (task, a generated config Inductor did not offer)."""
    from tuner.search_spaces.template import GEN
    from tuner.sweep.tasks import tasks_from_capture

    cap = session.capture()
    out = []
    for t in tasks_from_capture(cap, "convnet"):
        if t.kind == "template_choice" and t.space.gen is not None:
            offered = set(t.space.context["choices"])
            gen = next(c for c in t.space.configs() if c["choice"] not in offered)
            assert t.space.optuna_params(gen)["choice"] == GEN
            out.append((t, gen["choice"]))
    assert {t.signature["op"] for t, _ in out} >= {"convolution", "addmm"}, [t.name for t, _ in out]
    return out


def test_generated_template_configs_are_benchmarked_and_forced(session):
    """Configs outside Inductor's list: built from their ids (conv at the site, mm-family as a
    KernelTemplateChoice), timed in a round, and forced with nothing benchmarked and the numerics kept."""
    import tuner.backend as tb
    from tuner.core import Forcing, Kind
    from tuner.measure.jobs import GraphTrial, SiteBatch
    from tuner.measure.result import Status

    gen = _generated(session)
    r = session.run(SiteBatch({}, {t.key: (t.space.default["choice"], cid) for t, cid in gen}))
    assert r.status is Status.OK, r.error
    for t, cid in gen:
        assert 0 < r.timings[t.key][cid] < float("inf"), (t.name, r.timings.get(t.key))
    forcing = Forcing({Kind.SITE: {t.key: cid for t, cid in gen}})
    before = tb.stats()
    m = session.run(GraphTrial({}, forcing.to_json(), rounds=3))
    after = tb.stats()
    assert m.status is Status.OK, m.error  # numerics checked against eager inside
    # Every site found its generated choice (a choice that is not built is a miss). Benchmarks are not compared:
    # the unforced Triton kernels of both compiles are autotuned at run time and counted too.
    assert after["hits"] - before["hits"] >= len(gen), (before, after)


def _deploy(db_url, mode=None, batch=8):
    # torch.compile takes either mode= or options=, not both: with a mode the database comes from TUNER_DB.
    code = f"""
import json, os, torch, torch._inductor.config as ic
import tuner.backend as tb
from tuner.backend import journal
from tests.helpers.models import convnet
ic.freezing = True
torch.manual_seed(0)
m = convnet().cuda().to(torch.bfloat16).eval().to(memory_format=torch.channels_last)
x = torch.randn({batch}, 16, 32, 32, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
with torch.no_grad():
    ref = m(x)
    kw = {{"mode": {mode!r}}} if {mode!r} else {{"options": {{"db": {db_url!r}}}}}
    with journal.recording() as decisions:
        y = torch.compile(m, backend="tuned", **kw)(x)
err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
kernels = {{o: sum(d.kind.startswith("triton_") and d.outcome == o for d in decisions) for o in ("hit", "miss")}}
print("RESULT", json.dumps({{**tb.stats(), "err": err, "kernel_lookups": kernels}}))
"""
    import os

    env = {**os.environ, "TUNER_DB": db_url}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))[7:])


def test_sweep_then_tuned_compile_forces_winners_and_benchmarks_nothing(db_url, cwd_root):
    from typer.testing import CliRunner

    from tuner.cli import app
    from tuner.db import Database

    args = [
        "sweep",
        "--model",
        "tests.helpers.models:convnet",
        "--input-shape",
        "8,16,32,32",
        "--device",
        "cuda",
        "--dtype",
        "bf16",
        "--channels-last",
        "--budget",
        "quick",
        "--trials",
        "4",
        "--db",
        db_url,
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    from sqlalchemy import select

    from tuner.db.models import Task

    db = Database.open(db_url)
    with db.session() as ses:
        kinds = set(ses.scalars(select(Task.kind)))
    stats = db.stats()
    db.close()
    assert "template_choice" in kinds and any(k.startswith("triton_") for k in kinds), kinds
    assert stats["winners"] == stats["tasks"]
    s = _deploy(db_url)
    assert s["benchmarks"] == 0 and s["hits"] > 0 and s["misses"] == 0, s
    assert s["kernel_lookups"]["hit"] > 0 and s["kernel_lookups"]["miss"] == 0, s
    assert s["err"] < 3e-2
    # another batch: sites and graphs take the nearest stored answer; Triton kernels (keyed by their source, whose
    # sizes changed) find no entry and are counted as misses, not left out of stats()
    s = _deploy(db_url, batch=16)
    assert s["transferred"] > 0 and s["kernel_lookups"]["miss"] > 0 and s["misses"] >= s["kernel_lookups"]["miss"], s
    assert s["err"] < 3e-2
    # mode= passes through: a miss under max-autotune benchmarks as max-autotune would
    s = _deploy(db_url.replace("tuning.db", "empty.db"), "max-autotune-no-cudagraphs")
    assert s["benchmarks"] > 0 and s["err"] < 3e-2, s
    s = _deploy(db_url, "reduce-overhead")
    assert s["benchmarks"] == 0 and s["err"] < 3e-2, s


def test_worker_survives_an_illegal_memory_access(tmp_path):
    from tuner.measure import GraphTrial, Worker
    from tuner.measure.result import Status

    flag = tmp_path / "crash"
    spec = WorkloadSpec(model="tests.helpers.models:ima_in_worker", device="cuda", input_shape=(1024,))
    import os

    os.environ["TUNER_TEST_CRASH"] = str(flag)
    w = Worker(spec, tmp_path / "logs", trial_timeout_s=120, recycle_after=10**6)
    try:
        w.start()
        flag.write_text("1")
        m = w.run(GraphTrial({}, {"triton_pointwise": {"0" * 64: {"XBLOCK": 8, "num_warps": 1, "num_stages": 1}}}))
        assert not m.ok and "illegal memory access" in (m.error or ""), m
        flag.unlink()
        m = w.run(GraphTrial({}, {"triton_pointwise": {"1" * 64: {"XBLOCK": 8, "num_warps": 1, "num_stages": 1}}}))
        assert m.status is Status.OK, m
    finally:
        w.close()
        os.environ.pop("TUNER_TEST_CRASH", None)


_LUT_RUN = """
import json, sys, torch
import torch._inductor.config as ic
from torch._inductor import select_algorithm
from torch._inductor.lookup_table import LookupTableChoices
from torch._inductor.virtualized import V
from tests.helpers.models import convnet
seen = []
select_algorithm.add_feedback_saver(lambda timings, name, *a: seen.append(name))
if sys.argv[1] != "-":
    ic.lookup_table.table = json.load(open(sys.argv[1]))
    V.set_choices_handler(LookupTableChoices())
torch.manual_seed(0)
m = convnet().cuda().to(torch.bfloat16).eval().to(memory_format=torch.channels_last)
x = torch.randn(8, 16, 32, 32, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
with torch.no_grad():
    torch.compile(m, options={"max_autotune_gemm": True, "max_autotune_gemm_backends": "ATEN,TRITON"})(x)
print("BENCHMARKED", json.dumps(seen))
"""


def _benchmarked_ops(table):
    out = subprocess.run([sys.executable, "-c", _LUT_RUN, table], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("BENCHMARKED"))[12:])


def _triton_mm_at_the_addmm_site(db_url):
    """Store one of the convnet's addmm site's own Triton mm choices as its winner: which choice a 3-trial sweep keeps
    varies (at 8 rows, tuner's split-K kernel, which Inductor's table cannot name, or cuBLAS may win)."""
    from sqlalchemy import select

    from tuner.core import Kind
    from tuner.db import Database
    from tuner.db.models import Task, Winner
    from tuner.search_spaces.template import parse_ktc_id

    db = Database.open(db_url)
    try:
        with db.session() as s:
            task = next(
                t
                for t in s.scalars(select(Task).where(Task.kind == str(Kind.SITE)))
                if t.signature.get("op") == "addmm"
            )
            device_id = s.scalars(select(Winner.device_id)).first()  # the sweep's device: every winner is on it
            ids = task.signature["space"]["choices"]
            choice = next(c for c in ids if (p := parse_ktc_id(c)) is not None and p[0] == "triton::mm")
            tid = task.id
        db.set_winner(tid, device_id, None, {"choice": choice}, None, None)
    finally:
        db.close()


def test_exported_lookup_table_drives_inductor_without_tuner(db_url, tmp_path, cwd_root):
    from typer.testing import CliRunner

    from tuner.cli import app

    args = [
        "sweep",
        "--model",
        "tests.helpers.models:convnet",
        "--input-shape",
        "8,16,32,32",
        "--device",
        "cuda",
        "--dtype",
        "bf16",
        "--channels-last",
        "--no-freezing",
        "--budget",
        "quick",
        "--trials",
        "3",
        "--db",
        db_url,
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    _triton_mm_at_the_addmm_site(db_url)
    lut = tmp_path / "lut.json"
    res = CliRunner().invoke(app, ["db", "export", str(lut), "--format", "inductor-lut", "--db", db_url])
    assert res.exit_code == 0, res.output
    assert json.loads(lut.read_text()), (
        "the convnet's linear layer is an addmm site won by a Triton template: it must be exported"
    )
    assert "addmm" in _benchmarked_ops("-")  # plain max-autotune benchmarks the GEMM ...
    assert "addmm" not in _benchmarked_ops(str(lut))  # ... Inductor with the exported table does not


def test_a_decode_step_runs_inside_cuda_graphs_with_the_tuned_backend(tmp_path):
    """--mode decode under backend="tuned" with reduce-overhead: CUDA graphs are not skipped (the KV cache is
    updated in place, in buffers at fixed addresses), and the output matches eager."""
    import torch
    from torch._dynamo.utils import counters as dynamo_counters

    from tuner.workloads.spec import build_model, make_inputs

    spec = WorkloadSpec(
        model="hf:gpt2,n_layer=2,n_embd=128,n_head=4,vocab_size=1024",
        device="cuda",
        mode="decode",
        batch=4,
        seq_len=64,
        dtype="bf16",
    )
    model, x = build_model(spec), make_inputs(spec)[0]
    skips = dynamo_counters["inductor"]["cudagraph_skips"]
    with torch.no_grad():
        ref = model(x)
        fn = torch.compile(
            model, backend="tuned", options={"db": f"sqlite:///{tmp_path / 'empty.db'}", "mode": "reduce-overhead"}
        )
        outs = [fn(x).clone() for _ in range(3)]  # the first records, the later ones replay
    assert dynamo_counters["inductor"]["cudagraph_skips"] == skips
    # bf16 logits reach |90| here, and eager's own bf16 error against fp32 is ~0.25 at them: the bound is 2% of the
    # logits' scale (a wrong cache slot or a stale replay moves them by their own size)
    scale = ref.float().abs().max().item()
    assert all((o.float() - ref.float()).abs().max().item() <= 0.02 * scale for o in outs)


def test_inductors_pad_mm_benchmarks_count_as_benchmarks(tmp_path):
    """A matmul with an unaligned size (GPT-2's LM head: 50257 columns) makes Inductor's pad_mm pass time it padded
    and not, at compile time, with nothing in its cache: stats() counts that as benchmarks."""
    import os

    code = f"""
import json, torch
import tuner.backend as tb
from torch._dynamo.utils import counters
m = torch.nn.Linear(768, 50257, bias=False).cuda().to(torch.bfloat16)
x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
with torch.no_grad():
    torch.compile(m, backend="tuned", options={{"db": {f"sqlite:///{tmp_path / 'empty.db'}"!r}}})(x)
print("RESULT", json.dumps({{**tb.stats(), "pad_mm_bench": counters["inductor"]["pad_mm_bench"]}}))
"""
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TUNER_CACHE_DIR": str(tmp_path / "tuner"),
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))[7:])
    assert r["pad_mm_bench"] >= 1 and r["benchmarks"] >= r["pad_mm_bench"], r
