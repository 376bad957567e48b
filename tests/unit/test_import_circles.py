"""No import circle anywhere in ``surefoot``: the package's modules import one another one way.

The graph is read from the source with ``ast``: every ``import`` and ``from … import``
statement of every module, at any depth (inside functions, so a circle cannot hide behind a
lazy import) and under ``if TYPE_CHECKING:`` too (an annotation's import still ties two
modules together, and breaking it is a matter of design, not of a guard). ``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg`` itself (its
``__init__``). Modules loaded by name through ``importlib.import_module`` are not followed
(the layout test checks those).

Circles are strongly connected parts of the graph; each is reported as one path that ends
where it starts. The few that exist today are in ``ALLOWED``, each with why it is there; an
entry that no longer occurs fails the test, so the list can only shrink.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

# The graph is read by scripts/gen_architecture.py, which also draws docs/architecture.md.
_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_architecture.py"
_spec = importlib.util.spec_from_file_location("gen_architecture", _SCRIPT)
assert _spec and _spec.loader
_gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gen)
import_graph = _gen.import_graph

# Circles that exist today, each the exact set of its modules (or ``pkg.*``: any circle whose
# modules all lie under pkg), with the reason. The integrator empties this as the owners
# fix them; a new circle, or one that grew, fails the test.
ALLOWED: dict[str, str] = {}


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The parts of ``graph`` whose modules all reach one another (two or more modules),
    by Tarjan's algorithm without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[set[str]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for start in sorted(graph):
        if start in index:
            continue
        enter(start)
        work = [(start, iter(sorted(graph[start])))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    part: set[str] = set()
                    while node not in part:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.add(member)
                    if len(part) > 1:
                        parts.append(part)
            elif child not in index:
                enter(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(parts, key=min)


def circle_through(graph: dict[str, set[str]], part: set[str]) -> list[str]:
    """A shortest circle inside ``part`` from its first module back to it, to name in a
    failure (the part may hold more modules than this one path)."""
    first = min(part)
    came_from = {first: first}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & part):
                if child == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), first]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{sorted(part)} holds no circle")


@functools.cache
def _package_graph() -> dict[str, set[str]]:
    return import_graph()


def _allowed_by(part: set[str], key: str) -> bool:
    if key.endswith(".*"):
        package = key[:-2]
        return all(m == package or m.startswith(package + ".") for m in part)
    return part == set(key.split())


def _report(graph: dict[str, set[str]], part: set[str]) -> str:
    return f"{' -> '.join(circle_through(graph, part))} ({len(part)} modules: {sorted(part)})"


def test_the_graph_is_read() -> None:
    """The graph holds known edges, lazy and relative ones included, so an empty or partial
    graph cannot pass."""
    graph = _package_graph()
    assert "surefoot.guard" in graph["surefoot.statebus._session"]  # from ..guard import ...
    assert "surefoot.statebus._entry" in graph["surefoot.statebus._store"]
    assert "surefoot.guard" in graph["surefoot.ui._source"]  # inside a function
    assert "surefoot.storage" in graph["surefoot.statebus._store"]  # from .. import storage
    assert len(graph) > 200


def test_the_circle_finder_names_each_circle(tmp_path: Path) -> None:
    """On made-up sources (a lazy import, a TYPE_CHECKING one, a package's __init__) the
    finder reports each circle as a path through its modules, and none in a clean graph."""
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from .b import B\nA = 1\n")
    (pkg / "b.py").write_text("def f():\n    from .c import C\nB = 2\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\nC = 3\n"
    )
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "x.py").write_text("from .. import sub\nfrom ..a import A\n")
    graph = import_graph(pkg)
    parts = strongly_connected(graph)
    assert parts == [{"demo.a", "demo.b", "demo.c"}]
    assert circle_through(graph, parts[0]) == ["demo.a", "demo.b", "demo.c", "demo.a"]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []
    big = {"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(big) == [{"a", "b", "c"}]
    assert circle_through(big, {"a", "b", "c"}) == ["a", "b", "a"]


def test_no_import_circle() -> None:
    """No module of surefoot imports, directly or through others, itself (but the circles
    allowed, with their reasons, in ALLOWED)."""
    graph = _package_graph()
    new = [
        _report(graph, part)
        for part in strongly_connected(graph)
        if not any(_allowed_by(part, key) for key in ALLOWED)
    ]
    assert new == []


def test_allow_list_has_no_stale_entries() -> None:
    """Every allowed circle still exists as listed, so fixing one forces removing its entry."""
    parts = strongly_connected(_package_graph())
    stale = [key for key in ALLOWED if not any(_allowed_by(part, key) for part in parts)]
    assert stale == []
