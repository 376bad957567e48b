"""An Elle-style checker for list-append transactions (Kingsbury & Alvaro, "Elle: Inferring
Isolation Anomalies from Experimental Observations", VLDB 2020).

Transactions append unique elements to lists and read whole lists, so one read reveals the
order of every append before it: the longest read of a key is its version order, and every
other read must be a prefix of it. From that order come Adya's dependencies between
transactions: ``ww`` (T1 appended the element right before T2's), ``wr`` (T2 read a list
ending in T1's element) and ``rw`` (T1 read a list that T2's element extends next), plus
``process`` (one client's order) and ``realtime`` (T1 completed before T2 was invoked)
edges. A cycle means no serial order exists; cycles are found as strongly connected
components (Tarjan) and named by their edges: ``G0`` (only ww), ``G1c`` (ww and wr),
``G-single`` (one rw), ``G2-item`` (two adjacent rw or more) or ``G-nonadjacent``, with
``-process`` or ``-realtime`` when the cycle needs those edges (then the history is
serializable but not strong-session or strict serializable).

Found without cycles: ``G1a`` (an element appended by a failed transaction was read), ``G1b``
(a read ended in a transaction's non-final append to that key), ``internal`` (a transaction's
read disagrees with its own earlier reads and appends), ``duplicate-elements`` (one element
twice in a read), ``garbage-read`` (an element nobody appended), ``incompatible-order`` (two
reads of a key neither of which is a prefix of the other) and ``lost-update`` (two committed
transactions read the same version of a key and both appended to it, Elle's definition).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ...errors import ConfigError
from ..history import History, Op, Pair
from ._graph import (
    DATA,
    PROCESS,
    REALTIME,
    RW,
    WR,
    WW,
    Graph,
    cheapest_path,
    name_of,
    process_edges,
    realtime_edges,
)
from ._result import Anomaly, CheckResult, as_pairs, ref

__all__ = ["MODELS", "check_list_append"]

MODELS = {
    "serializable": DATA,
    "strong-session-serializable": DATA | PROCESS,
    "strict-serializable": DATA | PROCESS | REALTIME,
}
"""The consistency models ``check_list_append`` checks, with the edges each orders by."""

# How many rw edges of one component to try for a G-single before falling back to G2.
_SINGLE_TRIES = 64
_SCALAR = (str, int, float, bool)


def _show(elements: list[Any]) -> str:
    """A list for an explanation: whole when short, else its length and its last elements."""
    if len(elements) <= 8:
        return repr(elements)
    return f"[… {len(elements) - 4} more, {', '.join(map(repr, elements[-4:]))}]"


def _name(p: Pair) -> str:
    return f"T{ref(p).index}"


def _mops(p: Pair) -> list[tuple[str, Any, Any]]:
    value = p.value
    if not isinstance(value, list):
        raise ConfigError(f"{p.describe()}: a txn's value is a list of micro-ops, got {value!r}")
    out = []
    for m in value:
        if not isinstance(m, list | tuple) or len(m) != 3 or m[0] not in ("append", "r"):
            raise ConfigError(
                f"{p.describe()}: a micro-op is ['append', key, element] or ['r', key, list], "
                f"got {m!r}"
            )
        f, k, v = m
        if not isinstance(k, str | int):
            raise ConfigError(f"{p.describe()}: a key is a string or an int, got {k!r}")
        if f == "append" and not isinstance(v, _SCALAR):
            raise ConfigError(f"{p.describe()}: an appended element is a JSON scalar, got {v!r}")
        if f == "r" and v is not None and not isinstance(v, list):
            raise ConfigError(f"{p.describe()}: a read's result is a list or null, got {v!r}")
        out.append((f, k, v))
    return out


class _Check:
    def __init__(self, pairs: list[Pair], model: int) -> None:
        self.pairs = pairs
        self.model = model
        self.anomalies: list[Anomaly] = []
        self.mops = [_mops(p) for p in pairs]
        # (key, element) -> (txn, is that txn's last append to the key)
        self.writer: dict[tuple[Any, Any], tuple[int, bool]] = {}
        self.reads: dict[Any, list[tuple[int, list[Any]]]] = defaultdict(list)
        self.external: dict[Any, list[tuple[int, list[Any]]]] = defaultdict(list)
        self.graph = Graph()
        self.why: dict[tuple[int, int, int], str] = {}

    def bad(self, kind: str, text: str, txns: Iterable[int], key: Any = None) -> None:
        ops = tuple(ref(self.pairs[t]) for t in txns)
        self.anomalies.append(Anomaly(kind, text, ops, key))

    # -- what each transaction did -----------------------------------------------------

    def index_appends(self) -> None:
        for t, mops in enumerate(self.mops):
            last: dict[Any, Any] = {}
            for f, k, v in mops:
                if f != "append":
                    continue
                if (k, v) in self.writer:
                    other = self.pairs[self.writer[(k, v)][0]]
                    raise ConfigError(
                        f"{self.pairs[t].describe()} and {other.describe()} both append {v!r} "
                        f"to key {k!r}; list-append needs unique elements per key"
                    )
                self.writer[(k, v)] = (t, False)
                last[k] = v
            for k, v in last.items():
                self.writer[(k, v)] = (t, True)

    def scan_reads(self) -> None:
        for t, p in enumerate(self.pairs):
            if p.type != "ok":
                continue
            full: dict[Any, list[Any] | None] = {}
            own: dict[Any, list[Any]] = defaultdict(list)
            for f, k, v in self.mops[t]:
                if f == "append":
                    own[k].append(v)
                    if full.get(k) is not None:
                        full[k] = [*full[k], v]  # type: ignore[misc]
                    continue
                if v is None:
                    raise ConfigError(f"{p.describe()}: an ok txn's read of {k!r} has no result")
                self.check_internal(t, k, v, full.get(k), own[k])
                if k not in full and not own[k]:
                    self.external[k].append((t, v))
                self.reads[k].append((t, v))
                full[k] = v  # never changed in place: an append makes a new list
                own[k] = []

    def check_internal(
        self, t: int, k: Any, v: list[Any], full: list[Any] | None, own: list[Any]
    ) -> None:
        p = self.pairs[t]
        if full is not None and v != full:
            self.bad(
                "internal",
                f"{_name(p)} read key {k!r} = {_show(v)}, but its own earlier reads and appends "
                "make "
                f"it {_show(full)}",
                [t],
                k,
            )
        elif full is None and own and v[-len(own) :] != own:
            self.bad(
                "internal",
                f"{_name(p)} appended {_show(own)} to key {k!r}, then read {_show(v)}, which does "
                "not end "
                "with them",
                [t],
                k,
            )

    # -- per key: the version order and what it rules out --------------------------------

    def orders(self) -> dict[Any, list[Any]]:
        """Each key's version order (its longest read). A read that is a prefix of it shows
        nothing it does not, so only the longest and the incompatible reads are searched
        for duplicates and unknown elements: linear in what was read, not quadratic."""
        out = {}
        for k, reads in self.reads.items():
            lt, longest = max(reads, key=lambda r: len(r[1]))
            odd = [(lt, longest)]
            for t, r in reads:
                if longest[: len(r)] != r:
                    odd.append((t, r))
                    self.bad(
                        "incompatible-order",
                        f"{_name(self.pairs[t])} read key {k!r} = {_show(r)} and "
                        f"{_name(self.pairs[lt])} read {_show(longest)}: neither is a prefix of "
                        "the "
                        "other",
                        [t, lt],
                        k,
                    )
            out[k] = longest
            seen: set[Any] = set()
            for t, r in odd:
                if len(set(r)) != len(r):
                    dup = sorted({x for x in r if r.count(x) > 1}, key=repr)
                    self.bad(
                        "duplicate-elements",
                        f"{_name(self.pairs[t])} read key {k!r} = {_show(r)}: {dup!r} more than "
                        "once",
                        [t],
                        k,
                    )
                seen.update(r)
            self.check_elements(k, seen)
        return out

    def check_elements(self, k: Any, seen: set[Any]) -> None:
        for x in sorted(seen, key=repr):
            w = self.writer.get((k, x))
            if w is not None and self.pairs[w[0]].type != "fail":
                continue
            readers = [t for t, r in self.reads[k] if x in r]
            if w is None:
                self.bad(
                    "garbage-read",
                    f"{_name(self.pairs[readers[0]])} read {x!r} in key {k!r}, which no "
                    "transaction appended",
                    readers[:1],
                    k,
                )
            else:
                self.bad(
                    "G1a",
                    f"{_name(self.pairs[readers[0]])} read {x!r} in key {k!r}, appended by "
                    f"{_name(self.pairs[w[0]])}, which failed",
                    [readers[0], w[0]],
                    k,
                )

    def intermediate_reads(self) -> None:
        for k, reads in self.reads.items():
            for t, r in reads:
                if not r:
                    continue
                w = self.writer.get((k, r[-1]))
                if w is not None and w[0] != t and not w[1]:
                    self.bad(
                        "G1b",
                        f"{_name(self.pairs[t])} read key {k!r} = {_show(r)}, ending in "
                        f"{r[-1]!r}, an "
                        f"intermediate append of {_name(self.pairs[w[0]])} (it appended more to "
                        f"{k!r} after it)",
                        [t, w[0]],
                        k,
                    )

    def lost_updates(self) -> None:
        seen: dict[tuple[Any, tuple[Any, ...]], list[int]] = defaultdict(list)
        for t, p in enumerate(self.pairs):
            if p.type != "ok":
                continue
            read: dict[Any, list[Any]] = {}
            wrote: set[Any] = set()
            for f, k, v in self.mops[t]:
                if f == "r":
                    read.setdefault(k, v)
                elif k not in wrote:
                    wrote.add(k)
                    if k in read:
                        seen[(k, tuple(read[k]))].append(t)
        for (k, v), txns in seen.items():
            if len(txns) > 1:
                names = ", ".join(_name(self.pairs[t]) for t in txns)
                self.bad(
                    "lost-update",
                    f"{names} all read key {k!r} = {_show(list(v))} and then appended to it, and "
                    "all "
                    "committed: one of their updates was based on a stale version",
                    txns,
                    k,
                )

    # -- the dependency graph --------------------------------------------------------------

    def edge(self, a: int, b: int, kind: int, why: str) -> None:
        if a == b:
            return
        self.graph.add(a, b, kind)
        self.why.setdefault((a, b, kind), why)

    def dependencies(self, orders: dict[Any, list[Any]]) -> None:
        failed = {t for t, p in enumerate(self.pairs) if p.type == "fail"}

        def writer(k: Any, x: Any) -> int | None:
            w = self.writer.get((k, x))
            return None if w is None or w[0] in failed else w[0]

        for k, order in orders.items():
            prev: int | None = None
            for i, x in enumerate(order):
                w = writer(k, x)
                if prev is not None and w is not None:
                    self.edge(
                        prev,
                        w,
                        WW,
                        f"appended {order[i - 1]!r} to key {k!r}, and the next element, {x!r}, "
                        "was appended by",
                    )
                prev = w
            for t, r in self.external.get(k, ()):
                if order[: len(r)] != r:
                    continue
                if r:
                    w = writer(k, r[-1])
                    if w is not None:
                        self.edge(
                            w, t, WR, f"appended {r[-1]!r} to key {k!r}, the last element read by"
                        )
                if len(r) < len(order):
                    w = writer(k, order[len(r)])
                    if w is not None:
                        last = f"up to {r[-1]!r}" if r else "empty"
                        self.edge(
                            t,
                            w,
                            RW,
                            f"read key {k!r} {last}, and its next element, {order[len(r)]!r}, was "
                            "appended by",
                        )
        nodes = {t for t, p in enumerate(self.pairs) if p.type != "fail"}
        if self.model & PROCESS:
            for a, b in process_edges(self.pairs, nodes):
                self.graph.add(a, b, PROCESS)
        if self.model & REALTIME:
            for a, b in realtime_edges(self.pairs, nodes):
                self.graph.add(a, b, REALTIME)

    # -- cycles ----------------------------------------------------------------------------

    def explain(self, steps: list[tuple[int, int, int]]) -> str:
        parts = []
        for a, b, kind in steps:
            pa, pb = self.pairs[a], self.pairs[b]
            if kind == PROCESS:
                text = f"{_name(pa)} ran before {_name(pb)} on process {pa.process!r}"
            elif kind == REALTIME:
                text = f"{_name(pa)} completed before {_name(pb)} was invoked"
            else:
                text = f"{_name(pa)} {self.why[(a, b, kind)]} {_name(pb)}"
            parts.append(f"{text} ({name_of(kind)})")
        return "; ".join(parts)

    def report_cycle(self, steps: list[tuple[int, int, int]] | None) -> None:
        if not steps:
            return
        kinds = [k for _, _, k in steps]
        rw, wr = kinds.count(RW), kinds.count(WR)
        if rw == 1:
            base = "G-single"
        elif rw > 1:
            adjacent = any(kinds[i] == RW and kinds[i - 1] == RW for i in range(len(kinds)))
            base = "G2-item" if adjacent else "G-nonadjacent"
        else:
            base = "G1c" if wr else "G0"
        suffix = "-realtime" if REALTIME in kinds else "-process" if PROCESS in kinds else ""
        txns = [a for a, _, _ in steps]
        text = f"a cycle of {len(steps)} transactions, so no serial order exists"
        if suffix:
            text += f" that respects {suffix[1:]} order"
        self.bad(base + suffix, f"{text}: {self.explain(steps)}", txns)

    def info_seen(self, orders: dict[Any, list[Any]]) -> int:
        """How many unknown-outcome transactions were read: they happened."""
        seen = set()
        for k, order in orders.items():
            for x in order:
                w = self.writer.get((k, x))
                if w is not None and self.pairs[w[0]].type == "info":
                    seen.add(w[0])
        return len(seen)

    def cycle_through(
        self, a: int, b: int, kind: int, allowed: int, within: set[int]
    ) -> list[tuple[int, int, int]] | None:
        back = cheapest_path(self.graph, b, a, allowed, within)
        return None if back is None else [(a, b, kind), *back]

    def data_cycles(self) -> list[set[int]]:
        g = self.graph
        comps = [set(c) for c in g.sccs(DATA)]
        for comp in comps:
            for sub in g.sccs(WW, comp):
                subset = set(sub)
                a = sub[0]
                b = next(w for w, k in g.out[a].items() if k & WW and w in subset)
                self.report_cycle(self.cycle_through(a, b, WW, WW, subset))
                break
            for sub in g.sccs(WW | WR, comp):
                subset = set(sub)
                found = next(
                    ((a, w) for a in sub for w, k in g.out[a].items() if k & WR and w in subset),
                    None,
                )
                if found is not None:
                    self.report_cycle(self.cycle_through(*found, WR, WW | WR, subset))
                    break
            rws = [(a, w) for a in comp for w, k in g.out[a].items() if k & RW and w in comp]
            single = None
            for a, b in rws[:_SINGLE_TRIES]:
                single = self.cycle_through(a, b, RW, WW | WR, comp)
                if single is not None:
                    break
            if single is not None:
                self.report_cycle(single)
            elif rws:
                a, b = rws[0]
                self.report_cycle(self.cycle_through(a, b, RW, DATA, comp))
        return comps

    def order_cycles(self, extra: int) -> None:
        g = self.graph
        allowed = self.model & (DATA | extra | (PROCESS if extra == REALTIME else 0))
        for comp in g.sccs(allowed):
            subset = set(comp)
            found = next(
                ((a, w) for a in comp for w, k in g.out[a].items() if k & extra and w in subset),
                None,
            )
            if found is not None:
                steps = self.cycle_through(*found, extra, allowed, subset)
                if steps is not None:
                    self.report_cycle(steps)


def check_list_append(
    history: History | Iterable[Op], *, model: str = "strict-serializable"
) -> CheckResult:
    """Check ``txn`` operations of list-append micro-ops for the anomalies ``model`` forbids.

    Shapes: ``txn`` whose value is a list of ``["append", key, element]`` and ``["r", key,
    list]`` (the read's list is None on the invocation and on ``fail`` / ``info``). Elements
    are unique per key (JSON scalars). ``info`` transactions whose appends were read are
    treated as committed; ``fail`` ones must never be read (``G1a``).

    Args:
        model: ``serializable`` (cycles of ww, wr, rw edges), ``strong-session-serializable``
            (also each process's order) or ``strict-serializable`` (also real-time order).

    Raises:
        ConfigError: an unknown model, a malformed transaction, or an element appended twice.
    """
    if model not in MODELS:
        raise ConfigError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    pairs = [p for p in as_pairs(history) if p.f == "txn"]
    c = _Check(pairs, MODELS[model])
    c.index_appends()
    c.scan_reads()
    orders = c.orders()
    c.intermediate_reads()
    c.lost_updates()
    c.dependencies(orders)
    c.data_cycles()
    if c.model & PROCESS:
        c.order_cycles(PROCESS)
    if c.model & REALTIME:
        c.order_cycles(REALTIME)
    stats = {
        "txns": len(pairs),
        "ok": sum(p.type == "ok" for p in pairs),
        "fail": sum(p.type == "fail" for p in pairs),
        "info": sum(p.type == "info" for p in pairs),
        "info_seen": c.info_seen(orders),
        "keys": len(orders),
        "edges": c.graph.edges(),
    }
    return CheckResult("list-append", tuple(c.anomalies), stats)
