"""Dependency graphs between operations: edges by kind, strongly connected components
(Tarjan), real-time and process order, and the cheapest cycle through an edge.

Edges are kept as ``node -> {successor: kinds}`` with one bit per kind, so one pair of
operations joined for several reasons (a write-write and a real-time order) is one entry.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

from ..history import Pair

__all__ = [
    "DATA",
    "PROCESS",
    "REALTIME",
    "RW",
    "WR",
    "WW",
    "Graph",
    "cheapest_path",
    "name_of",
    "process_edges",
    "realtime_edges",
]

WW, WR, RW, PROCESS, REALTIME = 1, 2, 4, 8, 16
DATA = WW | WR | RW
_NAMES = {WW: "ww", WR: "wr", RW: "rw", PROCESS: "process", REALTIME: "realtime"}
# The kind an edge is explained by when it has several: data first, anti-dependency last.
_PREFERENCE = (WW, WR, PROCESS, REALTIME, RW)
# Path costs (anti-dependencies, order edges, write-read edges, length), compared in order:
# the cycle found has as few rw edges as possible, then as few non-data edges, then wr.
_COST = {
    WW: (0, 0, 0, 1),
    WR: (0, 0, 1, 1),
    PROCESS: (0, 1, 0, 1),
    REALTIME: (0, 1, 0, 1),
    RW: (1, 0, 0, 1),
}


def name_of(kind: int) -> str:
    """``ww``, ``wr``, ``rw``, ``process`` or ``realtime``."""
    return _NAMES[kind]


def kind_of(kinds: int, allowed: int) -> int:
    """The kind that explains an edge carrying ``kinds`` when only ``allowed`` may be used."""
    usable = kinds & allowed
    return next(k for k in _PREFERENCE if usable & k)


class Graph:
    """A directed graph over integer nodes with kinds on its edges."""

    def __init__(self) -> None:
        self.out: dict[int, dict[int, int]] = {}

    def add(self, a: int, b: int, kind: int) -> None:
        """Add an edge ``a -> b`` of ``kind`` (a self-edge is ignored)."""
        if a == b:
            return
        succ = self.out.setdefault(a, {})
        succ[b] = succ.get(b, 0) | kind
        self.out.setdefault(b, {})

    def edges(self) -> int:
        """How many (node, successor) pairs."""
        return sum(len(s) for s in self.out.values())

    def sccs(self, allowed: int, within: set[int] | None = None) -> list[list[int]]:
        """The strongly connected components with more than one node, using only edges of
        ``allowed`` kinds (and only nodes in ``within``, if given). Tarjan's algorithm,
        iterative so deep graphs do not exhaust the stack."""
        out = self.out
        nodes: Iterable[int] = within if within is not None else out
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        on_stack: set[int] = set()
        stack: list[int] = []
        found: list[list[int]] = []
        counter = 0

        def succs(v: int) -> list[int]:
            return [
                w
                for w, k in out.get(v, {}).items()
                if k & allowed and (within is None or w in within)
            ]

        for root in nodes:
            if root in index:
                continue
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            work = [(root, iter(succs(root)))]
            while work:
                v, it = work[-1]
                advanced = False
                for w in it:
                    if w not in index:
                        index[w] = low[w] = counter
                        counter += 1
                        stack.append(w)
                        on_stack.add(w)
                        work.append((w, iter(succs(w))))
                        advanced = True
                        break
                    if w in on_stack and index[w] < low[v]:
                        low[v] = index[w]
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    if low[v] < low[parent]:
                        low[parent] = low[v]
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(comp)
        return found


def cheapest_path(
    graph: Graph, source: int, target: int, allowed: int, within: set[int]
) -> list[tuple[int, int, int]] | None:
    """The cheapest path ``source ⇝ target`` over ``allowed`` edges inside ``within``, as
    ``(from, to, kind)`` steps (fewest rw edges, then fewest order edges, then fewest wr,
    then shortest); None when there is none. Dijkstra over lexicographic costs."""
    best: dict[int, tuple[int, ...]] = {source: (0, 0, 0, 0)}
    back: dict[int, tuple[int, int]] = {}
    heap: list[tuple[tuple[int, ...], int]] = [((0, 0, 0, 0), source)]
    while heap:
        cost, v = heapq.heappop(heap)
        if cost != best.get(v):
            continue
        if v == target:
            steps = []
            while v != source:
                u, kind = back[v]
                steps.append((u, v, kind))
                v = u
            return steps[::-1]
        for w, kinds in graph.out.get(v, {}).items():
            if not kinds & allowed or w not in within:
                continue
            kind = kind_of(kinds, allowed)
            c = _COST[kind]
            new = (cost[0] + c[0], cost[1] + c[1], cost[2] + c[2], cost[3] + c[3])
            if w not in best or new < best[w]:
                best[w] = new
                back[w] = (v, kind)
                heapq.heappush(heap, (new, w))
    return None


def process_edges(pairs: Sequence[Pair], nodes: set[int]) -> list[tuple[int, int]]:
    """Each process's operations in the order it ran them (among ``nodes``)."""
    last: dict[object, int] = {}
    edges = []
    for i, p in enumerate(pairs):
        if i not in nodes:
            continue
        if p.process in last:
            edges.append((last[p.process], i))
        last[p.process] = i
    return edges


def realtime_edges(pairs: Sequence[Pair], nodes: set[int]) -> list[tuple[int, int]]:
    """``a -> b`` whenever ``a`` completed before ``b`` was invoked, reduced transitively.

    One sweep over invocations and completions in time order keeps the operations completed
    and not yet followed by a completed successor (a frontier, about one per process):
    an invocation gets an edge from each of them, and a completion retires the ones its own
    invocation saw, since every later operation reaches them through it. So every
    real-time order stays reachable with O(n × processes) edges instead of O(n²).
    Operations that never completed (``info``) are only ever targets.
    """
    events: list[tuple[float, int, int]] = []  # (time, 0 complete / 1 invoke, node)
    for i in nodes:
        p = pairs[i]
        events.append((p.start, 1, i))
        if p.stop != float("inf"):
            events.append((p.stop, 0, i))
    # At one instant completions go first; equal times are not ordered, so a completion at
    # t precedes only invocations after t: handled by looking at strict times below.
    events.sort()
    frontier: set[int] = set()
    saw: dict[int, tuple[int, ...]] = {}
    edges: list[tuple[int, int]] = []
    pending_done: list[int] = []
    pending_t: float | None = None
    for t, kind, i in events:
        if pending_t is not None and t != pending_t:
            for j in pending_done:
                frontier.difference_update(saw.pop(j, ()))
                frontier.add(j)
            pending_done, pending_t = [], None
        if kind == 0:
            pending_done.append(i)
            pending_t = t
        else:
            before = tuple(frontier)
            saw[i] = before
            edges.extend((j, i) for j in before)
    return edges
