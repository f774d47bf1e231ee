"""Any row can be bad and the product still works: a cell that is not JSON (hand-edited, damaged) makes a compile
miss that answer with one warning, every command skip the row and carry on, and ``tuner db check`` list and drop it."""

import logging
import sqlite3

import torch
from typer.testing import CliRunner

import tuner
import tuner.backend  # reset_stats and stats: a test run alone has not imported it yet
from tests.helpers.models import mlp
from tuner.cli import app

runner = CliRunner()


def _damaged_copy(src_url: str, tmp_path) -> str:
    """A copy of the swept database with one winner's config and another winner's task signature not JSON."""
    dst = tmp_path / "damaged.db"
    with sqlite3.connect(src_url.removeprefix("sqlite:///")) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    with sqlite3.connect(dst) as c:
        first, second = [r[0] for r in c.execute("SELECT task_id FROM tuner_winners ORDER BY id LIMIT 2")]
        c.execute("UPDATE tuner_winners SET config = '{not json' WHERE task_id = ?", (first,))
        c.execute("UPDATE tuner_tasks SET signature = ? WHERE id = ?", ("[" * 100000, second))
    return f"sqlite:///{dst}"


def test_a_compile_misses_a_damaged_answer_with_one_warning(swept_at_batch_1, tmp_path, caplog):
    url = _damaged_copy(swept_at_batch_1, tmp_path)
    tuner.backend.reset_stats()
    with caplog.at_level(logging.WARNING, logger="tuner"), torch.no_grad():
        out = tuner.compile(mlp().eval(), db=url)(torch.randn(1, 64))
    assert torch.isfinite(out).all()
    s = tuner.backend.stats()
    assert s["benchmarks"] == 0 and s["hits"] + s["misses"] > 0
    said = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(said) == 1, said


def test_every_command_skips_damaged_rows_and_carries_on(swept_at_batch_1, tmp_path, cwd_root):
    url = _damaged_copy(swept_at_batch_1, tmp_path)
    workload = ["--model", "tests.helpers.models:mlp", "--device", "cpu", "--threads", "2", "--input-shape", "1,64"]
    commands = {
        "stats": ["db", "stats", "--db", url],
        "show": ["db", "show", "--db", url],
        "export": ["db", "export", str(tmp_path / "out.jsonl"), "--db", url],
        "merge": ["db", "merge", url, "--db", f"sqlite:///{tmp_path / 'merged.db'}"],
        "report": ["report", "--out", str(tmp_path / "r.html"), "--db", url],
        "explain": ["explain", *workload, "--db", url],
        "sweep": ["sweep", *workload, "--budget", "quick", "--trials", "3", "--db", url],
    }
    for name, args in commands.items():
        r = runner.invoke(app, args)
        assert r.exit_code == 0 and "Traceback" not in r.output, (name, r.output[-2000:])
    r = runner.invoke(app, ["db", "check", "--db", url])
    assert r.exit_code == 0 and "unreadable row(s)" in r.output and "tuner_winners" in r.output, r.output


def test_db_check_lists_then_drops_the_damaged_rows(swept_at_batch_1, tmp_path):
    url = _damaged_copy(swept_at_batch_1, tmp_path)
    listed = runner.invoke(app, ["db", "check", "--db", url], env={"COLUMNS": "300"})
    assert listed.exit_code == 0 and "2 unreadable row(s)" in listed.output, listed.output
    assert "tuner_tasks" in listed.output and "tuner_winners" in listed.output
    assert "2 unreadable" in runner.invoke(app, ["db", "check", "--db", url]).output  # listing changed nothing
    dropped = runner.invoke(app, ["db", "check", "--drop", "--db", url])
    assert dropped.exit_code == 0 and "dropped 2 row(s)" in dropped.output
    assert "every row is readable" in runner.invoke(app, ["db", "check", "--db", url]).output
