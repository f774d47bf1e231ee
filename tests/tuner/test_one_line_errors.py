"""Bad input is one line and exit code 1, before any work, and commands that only read never create or change a
database. Each case failed on the command line with a traceback, a hang or a stray file before."""

import hashlib
import os

import pytest
import torch
from typer.testing import CliRunner

from tests.helpers.dbfill import fill
from tuner.cli import app

runner = CliRunner()
MLP = ["--model", "tests.helpers.models:mlp", "--device", "cpu", "--threads", "2"]


def _one_line(r, *words):
    text = " ".join(r.output.split())
    assert r.exit_code == 1 and "Traceback" not in r.output and len(r.output.strip().splitlines()) <= 3, r.output
    for w in words:
        assert w in text, r.output


@pytest.mark.parametrize("value", ["nan", "inf", "1e15", "-5"])
def test_time_budget_must_be_a_real_number_of_seconds(value, db_url):
    _one_line(
        runner.invoke(app, ["sweep", *MLP, "--input-shape", "1,64", "--time-budget", value, "--db", db_url]),
        "--time-budget",
    )


def test_zero_threads_is_refused(db_url):
    args = ["--model", "tests.helpers.models:mlp", "--device", "cpu", "--threads", "0", "--input-shape", "1,64"]
    _one_line(runner.invoke(app, ["bench", *args, "--db", db_url]), "--threads must be at least 1")


def test_a_port_that_is_no_number_and_a_password_never_shown():
    r = runner.invoke(app, ["db", "stats", "--db", "postgresql+psycopg://me:s3cret@127.0.0.1:abc/x"])
    _one_line(r, "port that is not a number")
    assert "s3cret" not in r.output
    r = runner.invoke(app, ["db", "upgrade", "--db", "postgresql+psycopg://me:s3cret@127.0.0.1:1/x"])
    _one_line(r, "cannot open database")
    assert "s3cret" not in r.output


@pytest.mark.parametrize("command", [["report"], ["bench", *MLP, "--input-shape", "1,64", "--modes", "eager"]])
def test_an_unwritable_out_is_refused_before_any_work(command, db_url, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _one_line(
        runner.invoke(app, [*command, "--out", str(blocker / "x" / "out.json"), "--db", db_url]), "cannot write there"
    )


@pytest.mark.parametrize("command", ["explain", "bench"])
def test_an_input_the_model_rejects_is_one_line(command, db_url, cwd_root, tmp_path):
    fill(db_url).close()
    r = runner.invoke(app, [command, *MLP, "--input-shape", "1,65", "--db", db_url])
    _one_line(r, "rejects its input of shape (1, 65)")


@pytest.mark.parametrize(
    "command", [["db", "stats"], ["db", "show"], ["db", "export", "OUT"], ["db", "check"], ["report", "--out", "OUT"]]
)
def test_read_only_commands_create_no_database_at_a_mistyped_path(command, tmp_path):
    typo = tmp_path / "tunnig.db"
    args = [str(tmp_path / "out") if a == "OUT" else a for a in command]
    _one_line(runner.invoke(app, [*args, "--db", f"sqlite:///{typo}"]), "no tuning database at")
    assert not typo.exists()


def test_read_only_commands_change_nothing_in_a_read_only_file(tmp_path):
    path = tmp_path / "x.db"
    fill(f"sqlite:///{path}").close()
    os.chmod(path, 0o444)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    url = f"sqlite:///{path}"
    for args in (
        ["db", "stats"],
        ["db", "show"],
        ["db", "export", str(tmp_path / "e.jsonl")],
        ["report", "--out", str(tmp_path / "r.html")],
    ):
        r = runner.invoke(app, [*args, "--db", url])
        assert r.exit_code == 0, (args, r.output)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_report_adds_no_optuna_tables(tmp_path):
    import sqlite3

    path = tmp_path / "x.db"
    fill(f"sqlite:///{path}").close()
    assert runner.invoke(app, ["report", "--out", str(tmp_path / "r.html"), "--db", f"sqlite:///{path}"]).exit_code == 0
    with sqlite3.connect(path) as c:
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "studies" not in tables and not any(t.startswith("trial_") for t in tables)


@pytest.mark.parametrize("url", ["notaurl", "foo://x"])
def test_an_unusable_database_url_warns_and_compiles_with_inductors_defaults(url, caplog):
    import logging

    import tuner
    from tests.helpers.models import mlp

    with caplog.at_level(logging.WARNING, logger="tuner"), torch.no_grad():
        out = tuner.compile(mlp().eval(), db=url)(torch.randn(1, 64))
    assert torch.isfinite(out).all()
    assert any("Inductor's defaults" in r.getMessage() for r in caplog.records)
