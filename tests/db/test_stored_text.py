"""What a database says is data, never code or markup: revalidate imports no factory the database names, and names
holding rich markup or terminal escapes print as text."""

from typer.testing import CliRunner

from tests.helpers.dbfill import DEV, ENV, GRAPH_SIG, fill
from tuner.cli import app
from tuner.db import Database
from tuner.search_spaces import space_for

runner = CliRunner()


def test_revalidate_never_imports_a_factory_the_database_names(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    canary = tmp_path / "called"
    monkeypatch.setenv("TUNER_TEST_CANARY", str(canary))
    db = Database.open(url)
    task = db.upsert_task("f" * 64, "cpp_graph", "g", GRAPH_SIG, space_for("cpp_graph", GRAPH_SIG).fingerprint())
    db.link_workload("tests.helpers.models:canary/infer/cpu/fp32/1x64", [task.id])
    db.close()
    r = runner.invoke(app, ["db", "revalidate", "--device", "cpu", "--db", url])
    assert r.exit_code == 0, r.output
    assert not canary.exists()
    assert "not re-measured: 1 stored model(s) named as code" in " ".join(r.output.split())


def test_names_with_markup_and_terminal_escapes_print_as_text(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    db = fill(url)
    name = "\x1b[2J\x1b[H[/oops][bold red]boom"
    d, e = db.device_id(DEV), db.environment_id(ENV)
    g = space_for("cpp_graph", GRAPH_SIG)
    task = db.upsert_task("9" * 64, "cpp_graph", name, GRAPH_SIG, g.fingerprint())
    t = db.record_trial(task.id, d, e, {**g.default, "cpp.simdlen": 256}, "ok", median_ms=0.5, baseline_ms=1.5)
    db.set_winner(task.id, d, t.id, {**g.default, "cpp.simdlen": 256}, 0.5, 1.5)
    db.close()
    r = runner.invoke(app, ["db", "show", "--db", url], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\\x1b[2J" in r.output and "[/oops][bold red]boom" in r.output
