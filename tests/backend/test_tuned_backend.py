import logging

import pytest
import torch
import torch._inductor.config as inductor_config

import tuner.backend as tb
from tests.helpers.models import mlp
from tuner.backend.compiler import compile_with_context
from tuner.backend.instrument.context import MeasuringContext
from tuner.backend.instrument.recorder import Recorder
from tuner.core import Forcing
from tuner.db import Database, current_device
from tuner.search_spaces import space_for


def _run(model, x, **compile_kw):
    with torch.no_grad():
        return torch.compile(model, **compile_kw)(x)


def test_registered_as_torch_compile_backend():
    assert "tuned" in torch._dynamo.list_backends(exclude_tags=())


def test_missing_database_falls_back_without_benchmarking(tmp_path, caplog):
    inductor_config.freezing = True
    m, x = mlp().eval(), torch.randn(16, 64)
    tb.reset_stats()
    with caplog.at_level(logging.WARNING, logger="tuner"):
        y = _run(m, x, backend="tuned", options={"db": f"sqlite:///{tmp_path / 'absent.db'}"})
    torch.testing.assert_close(y, m(x).detach())
    s = tb.stats()
    assert s["benchmarks"] == 0 and s["hits"] == 0 and s["misses"] >= 1
    assert "no tuning database" in caplog.text
    assert not (tmp_path / "absent.db").exists()  # the read path never creates a database


def test_unknown_option_is_a_clear_error():
    from torch._dynamo.exc import BackendCompilerFailed

    from tuner.errors import TunerError

    with pytest.raises(BackendCompilerFailed, match="unknown option") as failed:
        _run(mlp().eval(), torch.randn(4, 64), backend="tuned", options={"dbb": "x"})
    assert isinstance(failed.value.inner_exception, TunerError)


def test_missing_hook_falls_back_to_plain_inductor(monkeypatch, caplog, tmp_path):
    from tuner.backend.hooks import selector

    # As on a torch whose select_algorithm lacks the hook: the adapter's import failed.
    monkeypatch.setattr(selector, "_IMPORT_ERROR", ImportError("simulated: no AlgorithmSelectorCache"))
    m, x = mlp().eval(), torch.randn(8, 64)
    with caplog.at_level(logging.ERROR, logger="tuner"):
        y = _run(m, x, backend="tuned", options={"db": f"sqlite:///{tmp_path / 'absent.db'}"})
    torch.testing.assert_close(y, m(x).detach())
    assert "compiling with plain Inductor" in caplog.text


def _record(model, x):
    rec = Recorder()

    def backend(gm, ex, **_):
        return compile_with_context(gm, ex, MeasuringContext(Forcing(), "cpu", rec))

    _run(model, x, backend=backend)
    torch._dynamo.reset()
    return rec


def _store_winner(url, kind, key, config, signature):
    db = Database.open(url)
    dev = db.device_id(current_device("cpu"))
    t = db.upsert_task(key, kind, "test", signature, "fp")
    db.set_winner(t.id, dev, None, config, 1.0, 2.0)
    db.close()


def test_winners_are_forced_and_inductor_caches_follow_the_database(tmp_path, monkeypatch, db_url):
    """Pitfall 1: a warm FX-graph/AOT cache must not serve code compiled under another answer."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    inductor_config.freezing = False  # keep Inductor's FX-graph and AOTAutograd caches in play
    m, x = mlp().eval(), torch.randn(16, 64)
    graph = next(iter(_record(m, x).graphs.values()))
    # The record compile has no answer either, so its cache entries would serve the next compile, which then looks
    # nothing up (the test failed run alone): the tuned compiles start from a cache of their own.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor-tuned"))
    Database.open(db_url).close()

    tb.reset_stats()
    _run(m, x, backend="tuned", options={"db": db_url})  # no answer yet: Inductor's own lowering fills its caches
    torch._dynamo.reset()
    assert tb.stats()["misses"] >= 1, "the graph's lookup found nothing and is counted as a miss"

    _run(m, x, backend="tuned", options={"db": db_url})  # the same answer: Inductor's cache may serve it now
    torch._dynamo.reset()

    sig = {
        "space": {"isa": current_device("cpu").info["isa"], "threads": torch.get_num_threads(), "has_cpp_gemm": False}
    }
    config = {**space_for("cpp_graph", sig).default, "cpp.simdlen": 0}
    _store_winner(db_url, "cpp_graph", graph.key, config, sig)
    tb.reset_stats()
    y = _run(m, x, backend="tuned", options={"db": db_url})
    assert tb.stats()["hits"] == 1, "a changed database answer must miss Inductor's caches and be applied"
    assert tb.stats()["benchmarks"] == 0
    torch.testing.assert_close(y, m(x).detach())


def test_invalid_stored_winner_is_ignored(db_url, caplog):
    inductor_config.freezing = True
    m, x = mlp().eval(), torch.randn(16, 64)
    graph = next(iter(_record(m, x).graphs.values()))
    sig = {"space": {"isa": "AVX2", "threads": 2, "has_cpp_gemm": False}}
    _store_winner(db_url, "cpp_graph", graph.key, {"cpp.simdlen": 4096}, sig)
    tb.reset_stats()
    with caplog.at_level(logging.WARNING, logger="tuner"):
        y = _run(m, x, backend="tuned", options={"db": db_url})
    torch.testing.assert_close(y, m(x).detach())
    assert "ignoring stored winner" in caplog.text and tb.stats()["hits"] == 0


def test_local_first_then_shared_and_an_unreachable_shared_db_only_warns(tmp_path, caplog):
    from tests.helpers.dbfill import GRAPH_SIG

    inductor_config.freezing = True
    m, x = mlp().eval(), torch.randn(16, 64)
    rec = _record(m, x)
    graph = next(iter(rec.graphs.values()))
    site = next(iter(rec.sites.values()))
    sig = {
        **GRAPH_SIG,
        "space": {"isa": current_device("cpu").info["isa"], "threads": torch.get_num_threads(), "has_cpp_gemm": True},
    }
    local, shared = f"sqlite:///{tmp_path / 'local.db'}", f"sqlite:///{tmp_path / 'shared.db'}"
    _store_winner(local, "cpp_graph", graph.key, space_for("cpp_graph", sig).default, sig)
    site_sig = {"space": {"choices": site.choices, "default": site.default}}
    cpp = next(c for c in site.choices if c.startswith("cpp:"))
    _store_winner(shared, "template_choice", site.key, {"choice": cpp}, site_sig)

    tb.reset_stats()
    _run(m, x, backend="tuned", options={"db": local, "shared_db": shared})
    torch._dynamo.reset()
    assert tb.stats()["hits"] == 2  # the graph from the local db, one site from the shared db

    tb.reset_stats()
    with caplog.at_level(logging.WARNING, logger="tuner"):
        y = _run(
            m,
            x,
            backend="tuned",
            options={"db": local, "shared_db": "postgresql+psycopg://nobody@127.0.0.1:1/x?connect_timeout=2"},
        )
    torch.testing.assert_close(y, m(x).detach())
    assert tb.stats()["hits"] == 1 and tb.stats()["benchmarks"] == 0
    assert "compiling with Inductor's defaults" in caplog.text


def test_dynamic_shapes_compile_with_a_database_and_match_eager(db_url):
    """dynamic=True: a graph with symbolic sizes gets its answers or clean misses, never an error."""
    inductor_config.freezing = True
    m = mlp().eval()
    graph = next(iter(_record(m, torch.randn(16, 64)).graphs.values()))
    sig = {
        "space": {"isa": current_device("cpu").info["isa"], "threads": torch.get_num_threads(), "has_cpp_gemm": False}
    }
    _store_winner(db_url, "cpp_graph", graph.key, {**space_for("cpp_graph", sig).default, "cpp.simdlen": 0}, sig)
    tb.reset_stats()
    f = torch.compile(m, backend="tuned", options={"db": db_url}, dynamic=True)
    with torch.no_grad():
        for batch in (16, 5, 9):
            x = torch.randn(batch, 64)
            torch.testing.assert_close(f(x), m(x))
    s = tb.stats()
    assert s["benchmarks"] == 0 and s["hits"] + s["misses"] >= 1


def test_kernel_configs_can_be_left_to_inductor():
    """options={"kernels": False}: every answer but the Triton kernel configs, to find which kind costs a workload."""
    from tuner.backend.tuned import Options
    from tuner.core import Forcing
    from tuner.errors import TunerError

    assert Options.parse({"db": "sqlite://", "kernels": False}).kernels is False
    assert Options.parse({"db": "sqlite://"}).kernels is True
    with pytest.raises(TunerError, match="'kernels' must be true or false"):
        Options.parse({"db": "sqlite://", "kernels": "no"})
    from tuner.core import Kind
    from tuner.kinds import KERNEL_HOOK, where

    f = Forcing(
        {
            Kind.CPP_GRAPH: {"g": {"cpp.simdlen": 0}},
            Kind.SITE: {"s": "aten::mm:{}"},
            Kind.TRITON_POINTWISE: {"h": {"XBLOCK": 64}},
            Kind.FUSION: {"f": {"aggressive_fusion": True}},
        }
    )
    assert f.without(*where(hook=KERNEL_HOOK)) == Forcing(
        {k: f.of(k) for k in (Kind.CPP_GRAPH, Kind.SITE, Kind.FUSION)}
    )


def test_a_lever_left_out_keeps_inductors_choice_there_and_every_other_answer(tmp_path):
    """options={"without": [...]}: a winner group or kind left to Inductor, as `tuner bench --ablate` measures each."""
    from tests.helpers.dbfill import GRAPH_SIG
    from tuner.backend.tuned import Options
    from tuner.commands.bench import ablation
    from tuner.errors import TunerError

    inductor_config.freezing = True
    m, x = mlp().eval(), torch.randn(16, 64)
    rec = _record(m, x)
    graph, site = next(iter(rec.graphs.values())), next(iter(rec.sites.values()))
    sig = {
        **GRAPH_SIG,
        "space": {"isa": current_device("cpu").info["isa"], "threads": torch.get_num_threads(), "has_cpp_gemm": True},
    }
    url = f"sqlite:///{tmp_path / 'both.db'}"
    _store_winner(url, "cpp_graph", graph.key, space_for("cpp_graph", sig).default, sig)
    cpp = next(c for c in site.choices if c.startswith("cpp:"))
    _store_winner(
        url, "template_choice", site.key, {"choice": cpp}, {"space": {"choices": site.choices, "default": site.default}}
    )

    hits = {}
    for without in ([], ["template-site"], ["cpp_graph"]):
        tb.reset_stats()
        torch.testing.assert_close(_run(m, x, backend="tuned", options={"db": url, "without": without}), m(x).detach())
        torch._dynamo.reset()
        hits[tuple(without)] = tb.stats()["hits"]
    assert hits == {(): 2, ("template-site",): 1, ("cpp_graph",): 1}

    assert Options.parse({"db": url, "kernels": False}).without == (
        "triton_pointwise",
        "triton_reduction",
        "triton_persistent_reduction",
    )
    for bad in ("template-site", ["pickle"]):
        with pytest.raises(TunerError, match="without"):
            Options.parse({"db": url, "without": bad})
    assert ablation("cpu", []) == [
        "tuned",
        "tuned-without-template-site",
        "tuned-without-graph-knob",
        "tuned-without-attention",
        "tuned-without-fusion-grouping",
    ]
    assert "tuned-without-Triton-kernel" in ablation("cuda") and "tuned-no-cuda-graphs" in ablation("cuda")


def test_inductor_options_reach_the_compile_and_stand_over_a_stored_knob(db_url):
    """options= also takes Inductor's config, as torch.compile does with Inductor: ``cpp.simdlen`` 0 is scalar code.
    Stored, the graph's answer sets it; given as an option, the user's value stands."""
    from torch._inductor.utils import run_and_get_code

    from tuner.backend.tuned import Options
    from tuner.errors import TunerError

    inductor_config.freezing = True
    m, x = mlp().eval(), torch.randn(16, 64)

    def vectorized(options):
        torch._dynamo.reset()
        with torch.no_grad():
            y, code = run_and_get_code(torch.compile(m, backend="tuned", options={"db": db_url, **options}), x)
        torch.testing.assert_close(y, m(x))
        return "at::vec::" in "\n".join(code)

    Database.open(db_url).close()
    assert vectorized({}) and not vectorized({"cpp.simdlen": 0})
    graph = next(iter(_record(m, x).graphs.values()))
    sig = {
        "space": {"isa": current_device("cpu").info["isa"], "threads": torch.get_num_threads(), "has_cpp_gemm": False}
    }
    _store_winner(db_url, "cpp_graph", graph.key, {**space_for("cpp_graph", sig).default, "cpp.simdlen": 0}, sig)
    tb.reset_stats()
    assert not vectorized({}) and tb.stats()["hits"] == 1
    assert vectorized({"cpp.simdlen": None})

    assert Options.parse({"db": db_url, "triton.cudagraphs": True}).inductor == {"triton.cudagraphs": True}
    with pytest.raises(TunerError, match="Inductor's config names"):
        Options.parse({"db": db_url, "triton.cudagraph": True})
