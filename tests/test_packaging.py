"""The wheel installs the mapped packages (tuner.db from db/, …) and its console script works."""

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIRS = {"tuner": "tuner", "search_spaces": "tuner.search_spaces", "db": "tuner.db", "backend": "tuner.backend"}


def _packages() -> list[str]:
    """Every package of the checkout, by its installed name (a package missing from pyproject's list is missing
    from the wheel)."""
    out = []
    for top, name in DIRS.items():
        for init in sorted((ROOT / top).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / top).parts
            out.append(".".join((name, *rel)))
    return out


def test_wheel_installs_in_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        cwd=tmp_path,
    )
    wheel = next(dist.glob("tuner-*.whl"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)  # isolated from the checkout's editable install
    py = env_dir / "bin" / "python"
    # The pip that venv bundles with Python 3.11.7 (23.2) writes no console scripts for Metadata 2.4 wheels.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True, cwd=tmp_path, env=env)
    # Everything --help and the schema need; torch (GBs) is imported lazily and left out here.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, cwd=tmp_path, env=env)
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "typer", "rich", "sqlalchemy", "alembic"],
        check=True,
        cwd=tmp_path,
        env=env,
    )
    out = subprocess.run(
        [str(env_dir / "bin" / "tuner"), "--help"], check=True, capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert "sweep" in out.stdout and "db" in out.stdout
    probe = "import tuner.db.migrations, tuner.db.models, tuner.search_spaces.base, tuner.db as d; print(d.__file__)"
    where = subprocess.run(
        [str(py), "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path, env=env
    ).stdout
    assert str(env_dir) in where, where  # the wheel's copy, not the checkout
    versions = list((Path(where.strip()).parent / "migrations" / "versions").glob("0*.py"))
    assert len(versions) >= 2
    files = [p.split("/")[0:-1] for p in _wheel_files(wheel) if p.endswith("/__init__.py")]
    assert set(_packages()) <= {".".join(f) for f in files}, (
        "a package is missing from pyproject's [tool.setuptools] packages"
    )


def _wheel_files(wheel: Path) -> list[str]:
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        return z.namelist()
