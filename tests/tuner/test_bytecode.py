"""Bytecode for tuner's own processes where Python writes none beside its sources (``tuner.bytecode``): kept under
tuner's cache folder for the process and those it starts, the measured packages compiled there once; nothing changes
where the install has its bytecode, where Python writes it, or with ``TUNER_BYTECODE_CACHE=0``. Each case runs in a
fresh interpreter, as the command line starts one."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, os, subprocess, sys
    from pathlib import Path
    from tuner import bytecode
    prefix = bytecode.keep(Path(sys.argv[1]), enabled=sys.argv[2] == "1", probe="bare_pkg")
    took = [bytecode.precompile(prefix, ("bare_pkg",), workers=2) for _ in range(2)] if prefix else []
    import bare_pkg.mod
    child = subprocess.run([sys.executable, "-c", "import sys; print(sys.pycache_prefix, sys.dont_write_bytecode)"],
                           capture_output=True, text=True, check=True).stdout.split()
    print(json.dumps({"prefix": str(prefix) if prefix else None, "took": took, "child": child}))
""")


@pytest.fixture
def bare(tmp_path):
    """A package installed with no bytecode beside its sources."""
    pkg = tmp_path / "site" / "bare_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("VALUE = 1\n")
    return pkg


def _run(bare, tmp_path, enabled="1", **env_set):
    env = {**os.environ, "PYTHONPATH": f"{bare.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **env_set}
    for name in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE"):
        if name not in env_set:
            env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "cache"), enabled],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_without_bytecode_it_is_kept_under_the_cache_for_the_process_and_its_children(bare, tmp_path):
    r = _run(bare, tmp_path, PYTHONDONTWRITEBYTECODE="1")
    prefix = tmp_path / "cache" / "bytecode"
    assert r["prefix"] == str(prefix)
    assert r["took"][0] is not None and r["took"][1] is None, "compiled once, then found compiled"
    assert r["child"] == [str(prefix), "False"], "a process it starts reads and writes the same bytecode"
    compiled = [p.name for p in prefix.rglob("*.pyc")]
    assert any(n.startswith("mod.") for n in compiled) and any(n.startswith("__init__.") for n in compiled)
    assert not list(bare.rglob("*.pyc")), "nothing is written beside the sources"


def test_nothing_changes_where_bytecode_is_at_hand_or_asked_off(bare, tmp_path):
    assert _run(bare, tmp_path)["prefix"] is None, "Python writes bytecode itself"
    assert _run(bare, tmp_path, "0", PYTHONDONTWRITEBYTECODE="1")["prefix"] is None, "TUNER_BYTECODE_CACHE=0"
    import compileall

    compileall.compile_dir(str(bare), quiet=2)
    assert _run(bare, tmp_path, PYTHONDONTWRITEBYTECODE="1")["prefix"] is None, "the install compiled its sources"
