"""The modules of ``surefoot.durable`` and of ``surefoot.storage`` import one another in one
direction only, and ``durable`` reaches storage through its protocols only.

The graph is read from the source with ``ast`` (every import, also those inside functions
and under ``TYPE_CHECKING``), so a circle cannot hide behind a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import surefoot

PACKAGE = "surefoot.durable"
SRC = Path(surefoot.__file__).parent
BACKENDS = ("sql", "sqlite", "postgres", "redis", "memory")


def _modules(package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (the package itself for ``__init__``)."""
    root = SRC.joinpath(*package.split(".")[1:])
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, names taken from it) for each import statement in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = _package_of(name, path)
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names]))
    return out


def _graph(package: str = PACKAGE) -> dict[str, set[str]]:
    mods = _modules(package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for mod, names in _imports(name, path):
            # ``from . import x`` imports the submodule x when there is one
            targets = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in mods] or [mod]
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n]
            if n not in state and (found := visit(n)) is not None:
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_graph_is_read() -> None:
    """The graph sees the known edges (so an empty graph cannot pass the circle check)."""
    graph = _graph()
    assert f"{PACKAGE}._registry" in graph[f"{PACKAGE}._app"]
    assert f"{PACKAGE}._decide" in graph[f"{PACKAGE}._saga"]
    assert f"{PACKAGE}._decide" in graph[f"{PACKAGE}._step"]


def test_cycle_finder_finds_a_circle() -> None:
    """The circle finder reports a circle in a graph that has one."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("package", ["surefoot.durable", "surefoot.storage"])
def test_no_import_circle(package: str) -> None:
    """No module of the package imports, directly or through others, itself."""
    assert _cycle(_graph(package)) is None


def test_durable_imports_no_storage_backend() -> None:
    """durable uses the journal through the protocols of storage/, never a backend module
    (sql, sqlite, postgres, redis, memory), so any backend that offers them will do."""
    bad = [
        f"{name}: {mod}"
        for name, path in _modules().items()
        for mod, _ in _imports(name, path)
        if mod.startswith("surefoot.storage.") and mod.split(".")[2] in BACKENDS
    ]
    assert bad == []


def test_no_private_names_imported() -> None:
    """No module of surefoot.durable imports another module's ``_private`` name."""
    bad = []
    for name, path in _modules().items():
        for mod, names in _imports(name, path):
            for n in names:
                private = n.startswith("_") and not n.startswith("__")
                if private and f"{mod}.{n}" not in _modules():  # a private module is fine
                    bad.append(f"{name}: from {mod} import {n}")
    assert bad == []
