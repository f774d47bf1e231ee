"""The layout rules of the project, checked on its source: short functions and modules in every package, and Inductor's
internals imported only by ``backend/`` (the adapters and the owner of process-wide state)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 400


def _sources(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _sources("tuner", "db", "backend", "search_spaces"), ids=lambda p: str(p.relative_to(ROOT)))
def test_functions_and_modules_are_short(path):
    text = path.read_text()
    assert text.count("\n") <= MAX_MODULE_LINES, f"{path.name} has {text.count(chr(10))} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{path.name}:{node.lineno} {node.name} is {length} lines long"


@pytest.mark.parametrize("path", _sources("tuner", "search_spaces", "db"), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_backend_imports_inductor(path):
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        assert not any(n.startswith("torch._inductor") for n in names), f"{path.name}:{node.lineno} imports {names}"


SWEEP_SIDE = ("tuner.sweep", "tuner.study", "tuner.measure", "tuner.workloads", "tuner.commands", "tuner.cli", "tuner.backend.instrument")


@pytest.mark.parametrize("path", [p for p in _sources("backend", "db") if "instrument" not in p.parts], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_read_path_imports_nothing_of_the_sweep(path):
    """``backend/`` (but its instrument) and ``db/`` serve ``backend="tuned"``: they never import the sweep's packages."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        assert not any(n == p or n.startswith(p + ".") for n in names for p in SWEEP_SIDE), f"{path.name}:{node.lineno} imports {names}"


@pytest.mark.parametrize("path", _sources("search_spaces"), ids=lambda p: str(p.relative_to(ROOT)))
def test_search_spaces_are_data_and_import_no_backend(path):
    """A space is built from a signature alone: ``search_spaces/`` never imports the backend or the sweep."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        assert not any(n.startswith(("tuner.backend", *SWEEP_SIDE)) for n in names), f"{path.name}:{node.lineno} imports {names}"
