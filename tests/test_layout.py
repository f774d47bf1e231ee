"""The layout rules of the project, checked on its source: short functions and modules in every package, Inductor's
internals imported only by ``backend/`` (the adapters and the owner of process-wide state), and an import graph without
cycles, between modules and between packages."""

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 400


def _sources(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def _import_statements(path: Path) -> list[tuple[ast.AST, list[str]]]:
    """(statement, the module names it names) of every import in ``path``, as written."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.append((node, [a.name for a in node.names]))
        elif isinstance(node, ast.ImportFrom):
            out.append((node, [node.module or ""]))
    return out


@pytest.mark.parametrize(
    "path", _sources("tuner", "db", "backend", "search_spaces"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_functions_and_modules_are_short(path):
    text = path.read_text()
    assert text.count("\n") <= MAX_MODULE_LINES, f"{path.name} has {text.count(chr(10))} lines"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{path.name}:{node.lineno} {node.name} is {length} lines long"


@pytest.mark.parametrize("path", _sources("tuner", "search_spaces", "db"), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_backend_imports_inductor(path):
    for node, names in _import_statements(path):
        assert not any(n.startswith("torch._inductor") for n in names), f"{path.name}:{node.lineno} imports {names}"


SWEEP_SIDE = (
    "tuner.sweep",
    "tuner.study",
    "tuner.measure",
    "tuner.workloads",
    "tuner.commands",
    "tuner.cli",
    "tuner.backend.instrument",
)


@pytest.mark.parametrize(
    "path",
    [p for p in _sources("backend", "db") if "instrument" not in p.parts],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_the_read_path_imports_nothing_of_the_sweep(path):
    """``backend/`` (but its instrument) and ``db/`` serve ``backend="tuned"``: they never import the sweep's packages."""
    for node, names in _import_statements(path):
        assert not any(n == p or n.startswith(p + ".") for n in names for p in SWEEP_SIDE), (
            f"{path.name}:{node.lineno} imports {names}"
        )


@pytest.mark.parametrize("path", _sources("search_spaces"), ids=lambda p: str(p.relative_to(ROOT)))
def test_search_spaces_are_data_and_import_no_backend(path):
    """A space is built from a signature alone: ``search_spaces/`` never imports the backend or the sweep."""
    for node, names in _import_statements(path):
        assert not any(n.startswith(("tuner.backend", *SWEEP_SIDE)) for n in names), (
            f"{path.name}:{node.lineno} imports {names}"
        )


# The installed packages' folders: tuner/ is ``tuner``; db/, backend/ and search_spaces/ install under it.
INSTALLED = {"tuner": "tuner", "search_spaces": "tuner.search_spaces", "db": "tuner.db", "backend": "tuner.backend"}


@functools.cache
def _modules() -> dict[str, Path]:
    """{dotted module name: its file} of every installed module."""
    out = {}
    for folder, name in INSTALLED.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if folder == "tuner" and parts[0] in INSTALLED:
                continue
            out[".".join([name, *parts[:-1]] if parts[-1] == "__init__" else [name, *parts])] = path
    return out


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The installed modules an import statement loads: ``from pkg import sub`` loads the module ``pkg.sub``."""
    modules = _modules()
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            base = base.rsplit(".", 1)[0]
        target = (base + ("." + node.module if node.module else "")) if node.level else node.module or ""
        names = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names]
    out = []
    for name in names:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in modules and name != module:
            out.append(name)
    return out


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import the module runs, at its top or inside a function; those under ``if TYPE_CHECKING:`` never run."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


@functools.cache
def _graph() -> dict[str, frozenset[str]]:
    """{module: the installed modules it imports}."""
    return {
        m: frozenset(x for node in _runtime_imports(ast.parse(p.read_text())) for x in _imported(m, p, node))
        for m, p in _modules().items()
    }


def _package(module: str) -> str:
    """The package a module belongs to: ``tuner.X`` for a module under a subpackage X, else the module itself (a
    top-level module such as ``tuner.core`` stands alone)."""
    head = ".".join(module.split(".")[:2])
    return head if _modules().get(head, Path()).name == "__init__.py" else module


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of a directed graph, as its nodes in order, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    return next((c for n in sorted(edges) if n not in state and (c := walk(n))), None)


def _why(a: str, b: str) -> list[str]:
    return sorted(f"{x} -> {y}" for x, ys in _graph().items() for y in ys if _package(x) == a and _package(y) == b)


def test_no_two_modules_import_each_other():
    graph = _graph()
    pairs = sorted({tuple(sorted((a, b))) for a, bs in graph.items() for b in bs if a in graph.get(b, ())})
    assert not pairs, f"modules that import each other: {pairs}"


def test_the_packages_import_each_other_in_no_cycle():
    edges: dict[str, set[str]] = {}
    for a, bs in _graph().items():
        edges.setdefault(_package(a), set()).update(_package(b) for b in bs if _package(b) != _package(a))
    cycle = _cycle(edges)
    assert cycle is None, (
        "package cycle "
        + " -> ".join(cycle)
        + ": "
        + "; ".join(", ".join(_why(a, b)) for a, b in zip(cycle, cycle[1:]))
    )


# {package: the packages it must never import}: measurement knows nothing of search, a study nothing of the sweep
# that runs it, and the budget policy is plain arithmetic over what the others hand it.
NEVER = {
    "tuner.measure": ("tuner.sweep", "tuner.study"),
    "tuner.study": ("tuner.sweep",),
    "tuner.budget": ("tuner.sweep", "tuner.study", "tuner.measure"),
}


@pytest.mark.parametrize("package", sorted(NEVER))
def test_a_package_never_imports_what_sits_above_it(package):
    bad = [
        f"{a} -> {b}"
        for a, bs in _graph().items()
        if _package(a) == package
        for b in bs
        if _package(b) in NEVER[package]
    ]
    assert not bad, f"{package} imports {bad}"


def test_the_import_graph_checks_see_a_cycle(tmp_path):
    """The cycle finder itself: a graph with a cycle is caught, one without passes."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None
    assert "tuner.sweep.driver" in _graph() and "tuner.budget.shares" in _graph()["tuner.sweep.plan"]
