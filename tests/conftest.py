from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.helpers.models:NAME must import in spawned workers too
    sys.path.insert(0, str(ROOT))


def pytest_collection_modifyitems(config, items):
    import torch

    has_gpu = torch.cuda.is_available()
    run_slow = os.environ.get("TUNER_SLOW") == "1"
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: set TUNER_SLOW=1"))


@pytest.fixture(scope="session")
def _kernel_cache(tmp_path_factory):
    """One Inductor cache folder for the whole run: its compiled C++ and Triton kernels, keyed by their source, are
    built once. What a cache could serve a later test wrongly is off in every test (:func:`_isolated`)."""
    return tmp_path_factory.mktemp("inductor")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch, _kernel_cache):
    """Each test: its own cache folder and default database, Inductor's global state restored after. Inductor's
    FX-graph and AOTAutograd caches are off in this process (sweep and bench compiles never use them): a graph one
    test compiled under a forcing is not served to another. A test of those caches turns them on, with its own
    folder."""
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    monkeypatch.setenv("TUNER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TUNER_LOCK_DIR", str(tmp_path / "locks"))  # measurement locks are machine-wide otherwise
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(_kernel_cache))  # spawned workers inherit it
    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    monkeypatch.setattr(functorch_config, "enable_autograd_cache", False)
    monkeypatch.delenv("TUNER_DB", raising=False)
    from tuner.settings import settings

    settings.cache_clear()
    freezing = inductor_config.freezing
    yield
    inductor_config.freezing = freezing
    torch._dynamo.reset()
    settings.cache_clear()
    from tuner.backend import answers

    answers.forget()  # databases the tuned backend kept open


@pytest.fixture
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'tuning.db'}"


@pytest.fixture
def cwd_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    return ROOT


@pytest.fixture
def pg_url():
    """A fresh database on the PostgreSQL server named by TUNER_TEST_PG_URL (.ci/run starts one)."""
    admin = os.environ.get("TUNER_TEST_PG_URL")
    if not admin:
        if os.environ.get("CI"):
            pytest.fail("CI must provide TUNER_TEST_PG_URL (.ci/postgres.sh)")
        pytest.skip("no PostgreSQL server: set TUNER_TEST_PG_URL (bash .ci/postgres.sh prints one)")
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"tuner_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    with engine.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def any_db_url(request, tmp_path):
    """Contract tests: every storage test runs on SQLite and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'contract.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture(scope="session")
def sweep_at_batch_1(tmp_path_factory):
    """tests.helpers.models:mlp swept for real at batch 1 (--budget quick, 3 trials per task), once per test run:
    (its database URL, what the command printed). Tests that change the database work on a copy. Tuned frozen
    (--no-time-unfrozen): timed against unfrozen, this small graph wins either way within a few percent, and the
    tests of its frozen sites would follow the noise (``test_sweep_cpu`` times it)."""
    from typer.testing import CliRunner

    from tuner.cli import app

    folder = tmp_path_factory.mktemp("batch1")
    url = f"sqlite:///{folder / 'tuning.db'}"
    args = [
        "sweep",
        "--model",
        "tests.helpers.models:mlp",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--input-shape",
        "1,64",
        "--budget",
        "quick",
        "--trials",
        "3",
        "--no-time-unfrozen",
        "--db",
        url,
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # the spawned worker imports tests.helpers.models
        mp.setenv("TUNER_CACHE_DIR", str(folder / "cache"))
        mp.setenv("TUNER_LOCK_DIR", str(folder / "locks"))
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder / "inductor"))
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return url, result.output


@pytest.fixture(scope="session")
def swept_at_batch_1(sweep_at_batch_1):
    """The database URL of :func:`sweep_at_batch_1`."""
    return sweep_at_batch_1[0]
