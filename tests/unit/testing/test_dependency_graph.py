"""The graph parts of the checkers: real-time edges keep every real-time order reachable,
Tarjan finds exactly the cycles, and the cheapest cycle has the fewest anti-dependencies."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from surefoot.testing.checkers._graph import (
    DATA,
    RW,
    WR,
    WW,
    Graph,
    cheapest_path,
    realtime_edges,
)
from surefoot.testing.history import Op, Pair


def reach(n: int, edges: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """Every (a, b) with a path a ⇝ b (transitive closure, brute force)."""
    succ: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in edges:
        succ[a].add(b)
    out = set()
    for a in range(n):
        stack, seen = list(succ[a]), set()
        while stack:
            b = stack.pop()
            if b not in seen:
                seen.add(b)
                stack.extend(succ[b])
        out |= {(a, b) for b in seen}
    return out


@st.composite
def intervals(draw: st.DrawFn) -> list[Pair]:
    """Operations with random invocation and completion times (some never complete)."""
    pairs = []
    for i in range(draw(st.integers(1, 25))):
        start = draw(st.integers(0, 50))
        end = None if draw(st.integers(0, 5)) == 0 else start + draw(st.integers(0, 20))
        inv = Op("invoke", i, "txn", [], start)
        pairs.append(Pair(inv, None if end is None else Op("ok", i, "txn", [], end)))
    return pairs


@given(intervals())
def test_realtime_edges_reach_exactly_the_real_time_order(pairs: list[Pair]) -> None:
    """a ⇝ b through the reduced edges iff a completed strictly before b was invoked."""
    edges = realtime_edges(pairs, set(range(len(pairs))))
    want = {
        (a, b) for a, pa in enumerate(pairs) for b, pb in enumerate(pairs) if pa.stop < pb.start
    }
    assert reach(len(pairs), edges) == want
    assert all(pairs[a].stop < pairs[b].start for a, b in edges)


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, int]]]:
    n = draw(st.integers(1, 12))
    node = st.integers(0, n - 1)
    kind = st.sampled_from([WW, WR, RW])
    return n, draw(st.lists(st.tuples(node, node, kind), max_size=40))


@given(graphs())
def test_tarjan_finds_the_nodes_on_cycles(g: tuple[int, list[tuple[int, int, int]]]) -> None:
    """Each component has 2+ nodes that all reach each other, and every node on a cycle of
    two or more nodes is in one."""
    n, edges = g
    graph = Graph()
    for a, b, k in edges:
        graph.add(a, b, k)
    closure = reach(n, [(a, b) for a, b, _ in edges if a != b])
    comps = graph.sccs(DATA)
    found = {v for c in comps for v in c}
    assert found == {
        a
        for a in range(n)
        if any((a, b) in closure and (b, a) in closure for b in range(n) if b != a)
    }
    for c in comps:
        assert all((a, b) in closure for a in c for b in c if a != b)


def test_cheapest_path_prefers_fewer_anti_dependencies() -> None:
    """Of two ways back, the one with no rw edge is chosen even when it is longer."""
    g = Graph()
    g.add(0, 1, RW)  # short way: one rw
    g.add(1, 3, WW)
    g.add(0, 2, WW)  # long way: ww, wr, ww
    g.add(2, 4, WR)
    g.add(4, 3, WW)
    path = cheapest_path(g, 0, 3, DATA, {0, 1, 2, 3, 4})
    assert path == [(0, 2, WW), (2, 4, WR), (4, 3, WW)]
    assert cheapest_path(g, 3, 0, DATA, {0, 1, 2, 3, 4}) is None
