"""An import can only add measurements: it never defines what is valid, never forces a claim without its trial, and
costs no more to validate than the file is long. Crafted files from a hostile-but-fair probe, each refused or
made harmless; what the database forces afterwards is compared with what it forced before."""

import json
import time

import pytest
from typer.testing import CliRunner

from tests.helpers.dbfill import DEV, ENV, SITE_SIG, fill
from tuner.cli import app
from tuner.core import Forcing
from tuner.search_spaces import valid_winners
from tuner.db import Database
from tuner.db.export import FORMAT, SCHEMA

runner = CliRunner()
SITE_KEY = "b" * 64  # fill()'s template site: measured winner cpp:CppMicroGemmFP32Vec at 2x
NEW_KEY = "e" * 64


def _forced(url: str) -> dict:
    db = Database.open(url, create=False)
    try:
        return Forcing.from_winners(valid_winners(db.winners_for_device(DEV.fingerprint))).to_json()
    finally:
        db.close()


def _file(path, task: dict | None, key: str, config: dict, *, trial: dict | None = None, winner: dict | None = None):
    """A minimal export: header, device, environment, the task (unless None), a trial and a winner of ``config``."""
    recs = [
        {"type": "header", "format": FORMAT, "schema": SCHEMA, "tuner": "0.1.0", "devices": [], "created_at": None},
        {"type": "device", "fingerprint": DEV.fingerprint, "kind": DEV.kind, "name": DEV.name, "info": DEV.info},
        {
            "type": "environment",
            "fingerprint": ENV.fingerprint,
            "torch": ENV.torch,
            "triton": ENV.triton,
            "cuda": ENV.cuda,
            "python": ENV.python,
            "tuner": ENV.tuner,
        },
    ]
    if task is not None:
        recs.append({"type": "task", "key": key, "space_fingerprint": "x", "name": "crafted", **task})
    uid = "00000000-0000-4000-8000-000000000001"
    if trial is not None:
        recs.append(
            {
                "type": "trial",
                "uid": uid,
                "task": key,
                "device": DEV.fingerprint,
                "environment": ENV.fingerprint,
                "config": config,
                "status": "ok",
                "min_ms": None,
                "spread_ms": None,
                "error": None,
                "host": "h",
                "created_at": None,
                **trial,
            }
        )
    recs.append(
        {
            "type": "winner",
            "task": key,
            "device": DEV.fingerprint,
            "trial": uid if trial is not None else None,
            "config": config,
            "median_ms": 1e-6,
            "baseline_ms": 1e3,
            **(winner or {}),
        }
    )
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _fusion_sig(defaults: dict) -> dict:
    return {"backward": False, "lines": 3, "space": {"device": "cpu", "defaults": defaults, "pairs": []}}


def _fusion_task(defaults: dict) -> dict:
    return {"kind": "fusion_graph", "signature": _fusion_sig(defaults)}


FAST = {"median_ms": 0.001, "baseline_ms": 1000.0}  # a claimed million-fold gain, trial and all
CRAFTED = {
    "a flag Inductor traces with": (
        _fusion_task({"max_fusion_size": 64, "trace.enabled": False}),
        NEW_KEY,
        {"max_fusion_size": 64, "trace.enabled": True},
        FAST,
    ),
    "a flag Inductor lacks": (
        _fusion_task({"max_fusion_size": 64, "no_such_flag": False}),
        NEW_KEY,
        {"max_fusion_size": 64, "no_such_flag": True},
        FAST,
    ),
    "absurd template defaults on a new site": (
        {
            "kind": "template_choice",
            "signature": {
                "op": "mm",
                "inputs": [],
                "space": {
                    "choices": [
                        'triton::mm:{"BLOCK_K":32,"BLOCK_M":1000000000,"BLOCK_N":64,"num_stages":2,"num_warps":-4}'
                    ],
                    "default": 'triton::mm:{"BLOCK_K":32,"BLOCK_M":1000000000,"BLOCK_N":64,"num_stages":2,"num_warps":-4}',
                },
            },
        },
        NEW_KEY,
        {"choice": 'triton::mm:{"BLOCK_K":32,"BLOCK_M":1000000000,"BLOCK_N":64,"num_stages":2,"num_warps":-4}'},
        FAST,
    ),
    "a known site's signature rewritten to admit a choice": (
        {
            "kind": "template_choice",
            "signature": {**SITE_SIG, "space": {"choices": ["aten:evil"], "default": "aten:evil"}},
        },
        SITE_KEY,
        {"choice": "aten:evil"},
        FAST,
    ),
    "a known site given another kind": (
        {"kind": "cpp_graph", "signature": {"space": {"isa": "", "threads": 1}}},
        SITE_KEY,
        {"cpp.simdlen": None},
        FAST,
    ),
    "a CPU task claiming 300000 threads": (
        {
            "kind": "cpp_graph",
            "signature": {
                "backward": False,
                "lines": 1,
                "space": {"isa": "AVX512", "threads": 300000, "has_cpp_gemm": True},
            },
        },
        NEW_KEY,
        {"cpp.simdlen": None},
        FAST,
    ),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_signature_is_refused_and_changes_nothing(tmp_path, case, any_db_url):
    url = any_db_url
    fill(url).close()
    before = _forced(url)
    task, key, config, trial = CRAFTED[case]
    f = _file(tmp_path / "crafted.jsonl", task, key, config, trial=trial)
    t0 = time.perf_counter()
    r = runner.invoke(app, ["db", "import", str(f), "--db", url])
    assert time.perf_counter() - t0 < 10, "validation cost grows with a value from the file"
    assert r.exit_code == 1 and "error:" in r.output and "Traceback" not in r.output, r.output
    assert _forced(url) == before


def test_a_winner_with_no_trial_behind_it_is_ignored(tmp_path, any_db_url):
    url = any_db_url
    fill(url).close()
    before = _forced(url)
    f = _file(
        tmp_path / "claim.jsonl", _fusion_task({"max_fusion_size": 64}), NEW_KEY, {"max_fusion_size": 8}
    )  # no trial at all
    r = runner.invoke(app, ["db", "import", str(f), "--db", url])
    assert r.exit_code == 0 and "ignored 1 winner(s) with no measured trial" in " ".join(r.output.split()), r.output
    assert _forced(url) == before


def test_a_winner_whose_trial_is_of_another_config_is_no_winner(tmp_path):
    url = f"sqlite:///{tmp_path / 'mine.db'}"
    fill(url).close()
    before = _forced(url)
    f = _file(tmp_path / "mismatch.jsonl", None, SITE_KEY, {"choice": "aten:_mkl_linear"}, trial=FAST)
    text = f.read_text().replace(
        '"config": {"choice": "aten:_mkl_linear"}, "status"',
        '"config": {"choice": "cpp:CppMicroGemmFP32Vec"}, "status"',
        1,
    )
    f.write_text(text)
    assert runner.invoke(app, ["db", "import", str(f), "--db", url]).exit_code == 0
    assert _forced(url) == before


@pytest.mark.parametrize("ms, wins", [((0.05, 0.2), True), ((0.15, 0.2), False)])
def test_on_a_clash_the_faster_by_its_own_trial_wins(tmp_path, ms, wins, any_db_url):
    """The stored winner stands on a trial at 2x; an imported one with a trial at 4x replaces it, one at 1.33x not."""
    url = any_db_url
    fill(url).close()
    trial = {"median_ms": ms[0], "baseline_ms": ms[1]}
    f = _file(
        tmp_path / "clash.jsonl",
        None,
        SITE_KEY,
        {"choice": "aten:_mkl_linear"},
        trial=trial,
        winner={"median_ms": 1e-9},
    )
    assert runner.invoke(app, ["db", "import", str(f), "--db", url]).exit_code == 0
    forced = _forced(url)["template_choice"][SITE_KEY]
    assert forced == ("aten:_mkl_linear" if wins else "cpp:CppMicroGemmFP32Vec")
    db = Database.open(url, create=False)
    try:
        (row,) = [w for w in db.top_winners(10) if w["kind"] == "template_choice"]
        assert row["median_ms"] == (ms[0] if wins else 0.1)  # the trial's time, not the winner line's 1e-9
    finally:
        db.close()


def test_a_deeply_nested_line_is_one_line_of_error(tmp_path):
    url = f"sqlite:///{tmp_path / 'mine.db'}"
    f = _file(tmp_path / "deep.jsonl", None, SITE_KEY, {"choice": "x"})
    header = f.read_text().splitlines()[0]
    f.write_text(header + "\n" + '{"type": "trial", "config": ' + "[" * 100000 + "]" * 100000 + "}\n")
    r = runner.invoke(app, ["db", "import", str(f), "--db", url])
    assert r.exit_code == 1 and "nests its JSON too deeply" in r.output and "Traceback" not in r.output


def test_a_refused_import_into_a_new_path_leaves_no_database(tmp_path):
    f = _file(tmp_path / "bad.jsonl", *CRAFTED["a CPU task claiming 300000 threads"][:3], trial=FAST)
    r = runner.invoke(app, ["db", "import", str(f), "--db", f"sqlite:///{tmp_path / 'new.db'}"])
    assert r.exit_code == 1 and not (tmp_path / "new.db").exists()


def test_a_hand_edited_signature_naming_a_flag_is_ignored_at_compile_time():
    sig = _fusion_sig({"max_fusion_size": 64, "trace.enabled": False})
    assert valid_winners({NEW_KEY: ("fusion_graph", {"max_fusion_size": 64, "trace.enabled": True}, sig)}) == {}


def test_a_tasks_default_is_its_answer_without_a_trial_and_never_replaces_a_measured_winner(tmp_path, any_db_url):
    """A sweep stores Inductor's own choice as the answer of each task it did not measure: an import keeps it (a
    compile then neither misses nor autotunes there), and it never displaces a winner measured here."""
    url = any_db_url
    fill(url).close()
    before = _forced(url)
    default = {"max_fusion_size": 64}
    new = _file(tmp_path / "default.jsonl", _fusion_task(default), NEW_KEY, default)  # no trial
    r = runner.invoke(app, ["db", "import", str(new), "--db", url])
    assert r.exit_code == 0 and "ignored" not in r.output, r.output
    db = Database.open(url, create=False)
    try:
        assert valid_winners(db.winners_for_device(DEV.fingerprint))[NEW_KEY][1] == default
    finally:
        db.close()
    site_default = SITE_SIG["space"]["default"]
    assert site_default != before["template_choice"][SITE_KEY]
    claim = _file(tmp_path / "site-default.jsonl", None, SITE_KEY, {"choice": site_default})
    assert runner.invoke(app, ["db", "import", str(claim), "--db", url]).exit_code == 0
    assert _forced(url)["template_choice"][SITE_KEY] == before["template_choice"][SITE_KEY]
