import gzip
import json

import pytest
from typer.testing import CliRunner

from tests.helpers.dbfill import DEV, fill
from tuner.cli import app
from tuner.db import Database

runner = CliRunner()


def _snapshot(url):
    db = Database.open(url, create=False)
    try:
        with db.session() as s:
            from sqlalchemy import select

            from tuner.db.models import Task, Trial, Winner

            trials = sorted((t.uid, t.config_hash, t.status, t.median_ms) for t in s.scalars(select(Trial)))
            winners = sorted(
                (w.task.key, w.device.fingerprint, json.dumps(w.config, sort_keys=True), w.median_ms)
                for w in s.scalars(select(Winner))
            )
            tasks = sorted(t.key for t in s.scalars(select(Task)))
        return trials, winners, tasks
    finally:
        db.close()


@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz"])
def test_export_import_round_trip_is_identical_and_idempotent(tmp_path, name, any_db_url):
    a, b = f"sqlite:///{tmp_path / 'a.db'}", any_db_url
    fill(a).close()
    f = tmp_path / name
    assert runner.invoke(app, ["db", "export", str(f), "--db", a]).exit_code == 0
    r = runner.invoke(app, ["db", "import", str(f), "--db", b])
    assert r.exit_code == 0 and "trials=4" in r.output
    assert _snapshot(a) == _snapshot(b)
    again = runner.invoke(app, ["db", "import", str(f), "--db", b])
    assert "trials=0" in again.output and "winners=0" in again.output
    assert _snapshot(a) == _snapshot(b)


def test_export_filters(tmp_path):
    a = f"sqlite:///{tmp_path / 'a.db'}"
    fill(a).close()
    f = tmp_path / "x.jsonl"
    runner.invoke(app, ["db", "export", str(f), "--db", a, "--device", "no such device"])
    assert [json.loads(line)["type"] for line in f.read_text().splitlines()].count("trial") == 0
    runner.invoke(app, ["db", "export", str(f), "--db", a, "--model", "model", "--device", DEV.fingerprint[:10]])
    assert [json.loads(line)["type"] for line in f.read_text().splitlines()].count("trial") == 4


def test_merge_keeps_the_faster_verified_winner(tmp_path):
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    fill(a).close()
    fill(b, tag="d").close()
    r = runner.invoke(app, ["db", "merge", a, "--db", b])
    assert r.exit_code == 0, r.output
    s = Database.open(b).stats()
    assert s["tasks"] == 4 and s["trials"] == 8 and s["winners"] == 4
    assert "trials=0" in runner.invoke(app, ["db", "merge", a, "--db", b]).output


def _tamper(lines, kind, change):
    out = []
    for line in lines:
        rec = json.loads(line)
        if (
            rec["type"] == kind
            and rec.get("config", {}).get("cpp.simdlen", "x") is not None
            and "cpp.simdlen" in rec.get("config", {})
        ):
            change(rec)
            kind = None  # once
        out.append(json.dumps(rec))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r["config"].update({"cpp.simdlen": 4096}), "not one of"),
        (lambda r: r["config"].update({"cpp.min_chunk_size": -64}), "not one of"),
        (lambda r: r["config"].update({"num_warps": 4}), "unknown parameter"),
        (lambda r: r["config"].update({"cpp.enable_loop_tail_vec": "yes"}), "true or false"),
        (lambda r: r.update({"median_ms": "fast"}), "wrong type"),
        (lambda r: r.update({"median_ms": -1.0}), "negative"),
        (lambda r: r.update({"status": "great"}), "unknown trial status"),
    ],
)
def test_tampered_files_are_refused_whole(tmp_path, mutate, message):
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    fill(a).close()
    f = tmp_path / "x.jsonl"
    runner.invoke(app, ["db", "export", str(f), "--db", a])
    f.write_text(_tamper(f.read_text().splitlines(), "trial", mutate))
    r = runner.invoke(app, ["db", "import", str(f), "--db", b])
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) <= 3  # one message (rich may wrap it)
    assert Database.open(b).stats()["trials"] == 0


def test_truncated_huge_and_foreign_files_are_refused(tmp_path):
    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    fill(a).close()
    f = tmp_path / "x.jsonl"
    runner.invoke(app, ["db", "export", str(f), "--db", a])
    text = f.read_text()
    cases = {
        "truncated": text[: len(text) - 40],
        "huge": text + json.dumps({"type": "trial", "pad": "x" * (100 << 20)}) + "\n",
        "foreign": '{"hello": 1}\n',
        "schema": text.replace('"schema": 1', '"schema": 99', 1),
        "pickle": text + "cos\nsystem\n(S'echo pwned'\ntR.\n",
    }
    for name, body in cases.items():
        g = tmp_path / f"{name}.jsonl"
        g.write_text(body)
        r = runner.invoke(app, ["db", "import", str(g), "--db", b])
        assert r.exit_code == 1 and "error:" in r.output, (name, r.output)
    gz = tmp_path / "cut.jsonl.gz"
    gz.write_bytes(gzip.compress(text.encode())[:-30])
    assert runner.invoke(app, ["db", "import", str(gz), "--db", b]).exit_code == 1
    assert Database.open(b).stats()["trials"] == 0
