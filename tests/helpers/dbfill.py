"""A small but real tuning database, built through the repository API (no sweep needed)."""

from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.search_spaces import space_for

DEV = DeviceInfo("cpu", "Test CPU", {"cores": 2, "threads": 2, "isa": "AVX512"})
ENV = EnvironmentInfo("2.14.1", "3.8.0", None, "3.11.7", "0.1.0")
GRAPH_SIG = {"backward": False, "lines": 10, "space": {"isa": "AVX512", "threads": 2, "has_cpp_gemm": True}}
SITE_SIG = {
    "op": "packed_linear",
    "inputs": [],
    "space": {"choices": ["cpp:CppMicroGemmFP32Vec", "aten:_mkl_linear"], "default": "aten:_mkl_linear"},
}


def copy_db(url: str, path) -> str:
    """A copy of the SQLite database at ``url`` (its pages and its write-ahead log) at ``path``; the copy's URL."""
    import sqlite3

    from tuner.db.engine import sqlite_path

    with sqlite3.connect(sqlite_path(url)) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
    return f"sqlite:///{path}"


def fill(url: str, tag: str = "a") -> Database:
    db = Database.open(url)
    d, e = db.device_id(DEV), db.environment_id(ENV)
    g = space_for("cpp_graph", GRAPH_SIG)
    graph = db.upsert_task(tag * 64, "cpp_graph", "model forward graph 0", GRAPH_SIG, g.fingerprint())
    site = db.upsert_task(("b" if tag == "a" else "c") * 64, "template_choice", "packed_linear", SITE_SIG, "fp")
    db.link_workload("model/infer/cpu/fp32/1x3x8x8", [graph.id, site.id])
    best = db.record_trial(
        graph.id,
        d,
        e,
        {**g.default, "cpp.simdlen": 256},
        "ok",
        median_ms=1.0,
        min_ms=0.9,
        spread_ms=0.1,
        baseline_ms=1.2,
    )
    db.record_trial(graph.id, d, e, g.default, "ok", median_ms=1.2, min_ms=1.1, spread_ms=0.1, baseline_ms=1.2)
    db.record_trial(graph.id, d, e, {**g.default, "cpp.simdlen": 0}, "compile_error", error="boom")
    db.set_winner(graph.id, d, best.id, {**g.default, "cpp.simdlen": 256}, 1.0, 1.2)
    t = db.record_trial(site.id, d, e, {"choice": "cpp:CppMicroGemmFP32Vec"}, "ok", median_ms=0.1, baseline_ms=0.2)
    db.set_winner(site.id, d, t.id, {"choice": "cpp:CppMicroGemmFP32Vec"}, 0.1, 0.2)
    return db
