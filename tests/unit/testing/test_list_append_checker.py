"""check_list_append: Elle's list-append analysis, shown able to fail on a hand-made history
of every anomaly class it names, and to pass valid histories, hand-made and generated."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from model_histories import interleave

from surefoot.errors import ConfigError
from surefoot.statebus import Store
from surefoot.testing.checkers import check_list_append
from surefoot.testing.history import (
    History,
    Op,
    Recorder,
    record_append,
    record_append_txn,
    record_list_read,
)


def t(kind: str, p: Any, *mops: list[Any]) -> str:
    """One record of a txn: ``t("ok", 0, ["append", "x", 1], ["r", "y", [2]])``."""
    return json.dumps({"type": kind, "process": p, "f": "txn", "value": list(mops)})


def txn(p: Any, *mops: list[Any], kind: str = "ok") -> list[str]:
    """A txn invoked and completed at once (reads left null on the invocation)."""
    invoked = [[f, k, None if f == "r" else v] for f, k, v in mops]
    return [t("invoke", p, *invoked), t(kind, p, *(mops if kind == "ok" else invoked))]


def H(*records: str | list[str]) -> History:
    flat: list[str] = []
    for r in records:
        flat.extend([r] if isinstance(r, str) else r)
    return History.loads("\n".join(flat))


def app(k: str, x: Any) -> list[Any]:
    return ["append", k, x]


def rd(k: str, v: list[Any] | None) -> list[Any]:
    return ["r", k, v]


# -- valid histories pass ------------------------------------------------------------------


def test_a_serial_history_passes() -> None:
    """Appends then reads, one after another, form a valid strict-serializable history."""
    h = H(
        txn(0, app("x", 1)),
        txn(1, rd("x", [1]), app("x", 2)),
        txn(0, rd("x", [1, 2]), rd("y", [])),
    )
    res = check_list_append(h)
    assert res.valid, res


def test_concurrent_transactions_may_serialize_either_way() -> None:
    """Two overlapping appends may land in either order; a reader overlapping them may see
    either prefix."""
    h = H(
        t("invoke", 0, app("x", 1)),
        t("invoke", 1, app("x", 2)),
        t("invoke", 2, rd("x", None)),
        t("ok", 1, app("x", 2)),
        t("ok", 2, rd("x", [2])),
        t("ok", 0, app("x", 1)),
        txn(2, rd("x", [2, 1])),
    )
    assert check_list_append(h).valid


def test_unknown_transactions_may_or_may_not_have_happened() -> None:
    """An info txn whose append is read happened (counted); one never read did not."""
    h = H(
        t("invoke", 0, app("x", 1)),
        t("info", 0, app("x", 1)),
        t("invoke", 1, app("x", 2)),
        t("info", 1, app("x", 2)),
        txn(2, rd("x", [1])),
    )
    res = check_list_append(h)
    assert res.valid, res
    assert res.stats["info"] == 2 and res.stats["info_seen"] == 1


def test_a_failed_transaction_nobody_read_is_fine() -> None:
    """A txn that failed and was never read leaves no trace."""
    h = H(txn(0, app("x", 1), kind="fail"), txn(1, rd("x", [])))
    assert check_list_append(h).valid


def test_reads_of_own_appends_are_consistent() -> None:
    """A txn that reads, appends and reads again sees its own append."""
    h = H(txn(0, app("x", 1)), txn(1, rd("x", [1]), app("x", 2), rd("x", [1, 2])))
    assert check_list_append(h).valid


# -- every anomaly is flagged ---------------------------------------------------------------

WRITE_SKEW = [
    txn(0, rd("x", []), rd("y", []), app("x", 1)),
    txn(1, rd("x", []), rd("y", []), app("y", 2)),
    txn(2, rd("x", [1]), rd("y", [2])),
]
"""Both read x and y empty; one appends to x, the other to y: each read misses the other's
append (two rw edges, adjacent): G2-item. The two are concurrent in this history."""


def concurrent(*txns: list[str]) -> list[str]:
    """The txns' invocations all before their completions: no real-time order among them."""
    return [pair[0] for pair in txns] + [pair[1] for pair in txns]


CASES: list[tuple[str, list[str | list[str]]]] = [
    # both appended 1 and 2 to x and y, in opposite orders
    (
        "G0",
        [
            concurrent(txn(0, app("x", 1), app("y", 1)), txn(1, app("x", 2), app("y", 2))),
            txn(0, rd("x", [1, 2]), rd("y", [2, 1])),
        ],
    ),
    # each read the other's append
    (
        "G1c",
        [concurrent(txn(0, app("x", 1), rd("y", [2])), txn(1, app("y", 2), rd("x", [1])))],
    ),
    # T1 read x before T2's append, yet saw T2's append to y
    (
        "G-single",
        [
            concurrent(txn(0, rd("x", []), rd("y", [2])), txn(1, app("x", 1), app("y", 2))),
            txn(2, rd("x", [1])),
        ],
    ),
    ("G2-item", [concurrent(WRITE_SKEW[0], WRITE_SKEW[1]), WRITE_SKEW[2]]),
    # four txns, rw edges separated by wr edges
    (
        "G-nonadjacent",
        [
            concurrent(
                txn(0, rd("a", []), rd("d", [1])),
                txn(1, app("a", 1), app("b", 1)),
                txn(2, rd("b", [1]), rd("c", [])),
                txn(3, app("c", 1), app("d", 1)),
            ),
            txn(4, rd("a", [1]), rd("c", [1])),
        ],
    ),
    # an append acknowledged, then a later read misses it (and another read shows it)
    ("G-single-realtime", [txn(0, app("x", 1)), txn(1, rd("x", [])), txn(2, rd("x", [1]))]),
    # an element from a transaction that failed
    ("G1a", [txn(0, app("x", 1), kind="fail"), txn(1, rd("x", [1]))]),
    # a read ending in the first of a transaction's two appends to x
    (
        "G1b",
        [
            concurrent(txn(0, app("x", 1), app("x", 2)), txn(1, rd("x", [1]))),
            txn(2, rd("x", [1, 2])),
        ],
    ),
    # a transaction's read that does not show its own append
    ("internal", [txn(0, app("x", 1), rd("x", []))]),
    # a read that contradicts the same transaction's earlier read
    ("internal", [txn(0, app("x", 1)), txn(1, rd("x", [1]), rd("x", []))]),
    ("duplicate-elements", [txn(0, app("x", 1)), txn(1, rd("x", [1, 1]))]),
    ("garbage-read", [txn(0, rd("x", [7]))]),
    (
        "incompatible-order",
        [
            concurrent(txn(0, app("x", 1)), txn(1, app("x", 2))),
            txn(2, rd("x", [1, 2])),
            txn(3, rd("x", [2])),
        ],
    ),
    # both read x empty, both appended to it, both committed
    (
        "lost-update",
        [
            concurrent(txn(0, rd("x", []), app("x", 1)), txn(1, rd("x", []), app("x", 2))),
            txn(2, rd("x", [1, 2])),
        ],
    ),
]


@pytest.mark.parametrize(
    ("kind", "records"), CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)]
)
def test_each_anomaly_is_flagged(kind: str, records: list[str | list[str]]) -> None:
    """The hand-made history of each anomaly class is invalid, with that class named and the
    transactions involved listed."""
    res = check_list_append(H(*records))
    assert kind in res.kinds(), res
    a = next(a for a in res.anomalies if a.kind == kind)
    assert a.ops and a.explanation


def test_a_cycle_is_explained_edge_by_edge() -> None:
    """A G2-item names each transaction and the key and elements behind each edge."""
    res = check_list_append(H(concurrent(WRITE_SKEW[0], WRITE_SKEW[1]), WRITE_SKEW[2]))
    (a,) = [a for a in res.anomalies if a.kind == "G2-item"]
    assert "read key 'y' empty, and its next element, 2, was appended by" in a.explanation
    assert "read key 'x' empty, and its next element, 1, was appended by" in a.explanation
    assert a.explanation.count("(rw)") == 2


def test_a_stale_read_is_serializable_but_not_strict() -> None:
    """Missing an acknowledged append breaks real-time order only: valid as serializable,
    flagged with -process under strong session serializability when one client did both."""
    h = H(txn(0, app("x", 1)), txn(0, rd("x", [])), txn(1, rd("x", [1])))
    assert check_list_append(h, model="serializable").valid
    assert "G-single-process" in check_list_append(h, model="strong-session-serializable").kinds()
    assert "G-single-realtime" in check_list_append(h).kinds()


def test_bad_input_is_a_clear_error() -> None:
    """An unknown model, a malformed micro-op or a repeated element is a ConfigError."""
    h = H(txn(0, app("x", 1)))
    with pytest.raises(ConfigError, match="model must be one of"):
        check_list_append(h, model="snapshot")
    with pytest.raises(ConfigError, match="micro-op"):
        check_list_append(H(txn(0, ["write", "x", 1])))
    with pytest.raises(ConfigError, match="unique elements"):
        check_list_append(H(txn(0, app("x", 1)), txn(1, app("x", 1))))


# -- property tests: valid histories pass, broken ones do not -----------------------------------


@st.composite
def append_histories(draw: st.DrawFn) -> list[Op]:
    """Transactions of one to four appends and reads over three keys, run against a dict of
    lists at their linearization points, interleaved; one in ten aborts (fail)."""
    model: dict[str, list[int]] = {}
    element = [0]

    def new_op(draw: st.DrawFn) -> tuple[str, Any]:
        mops: list[list[Any]] = []
        for _ in range(draw(st.integers(1, 4))):
            k = draw(st.sampled_from(["x", "y", "z"]))
            if draw(st.booleans()):
                element[0] += 1
                mops.append(["append", k, element[0]])
            else:
                mops.append(["r", k, None])
        return "txn", mops

    def apply(draw: st.DrawFn, f: str, mops: list[list[Any]]) -> tuple[str, Any]:
        if draw(st.integers(0, 9)) == 0:
            return "fail", mops
        done = []
        for op, k, v in mops:
            if op == "append":
                model.setdefault(k, []).append(v)
                done.append([op, k, v])
            else:
                done.append([op, k, list(model.get(k, []))])
        return "ok", done

    return interleave(draw, new_op, apply)


@given(append_histories())
def test_valid_generated_histories_pass(ops: list[Op]) -> None:
    """Every history of a strictly serializable list store, however interleaved, passes."""
    res = check_list_append(History(ops))
    assert res.valid, res


def _reads(ops: list[Op]) -> list[tuple[int, int, str, list[Any]]]:
    """(op position, micro-op position, key, list) of every ok read."""
    return [
        (i, j, m[1], m[2])
        for i, o in enumerate(ops)
        if o.type == "ok"
        for j, m in enumerate(o.value)
        if m[0] == "r"
    ]


def _shown_elsewhere(
    reads: list[tuple[int, int, str, list[Any]]], spare: int
) -> list[tuple[int, int, int, list[Any]]]:
    """(op, micro-op, position, list) for each non-last position of a read whose element,
    and ``spare`` more after it, another read of the key also shows."""
    return [
        (i, j, pos, v)
        for i, j, k, v in reads
        for pos in range(len(v) - 1)
        if any(k2 == k and len(v2) > pos + spare and (i2, j2) != (i, j) for i2, j2, k2, v2 in reads)
    ]


def _set_read(ops: list[Op], i: int, j: int, value: list[Any]) -> list[Op]:
    o = ops[i]
    mops = [list(m) for m in o.value]
    mops[j][2] = value
    return [*ops[:i], Op(o.type, o.process, o.f, mops, o.time), *ops[i + 1 :]]


@settings(max_examples=50)  # each mutation needs a history that allows it
@given(append_histories(), st.randoms(use_true_random=False))
def test_a_dropped_element_is_flagged(ops: list[Op], rnd: random.Random) -> None:
    """A read with one element removed (one another read also shows) is flagged."""
    choices = _shown_elsewhere(_reads(ops), spare=0)
    assume(choices)
    i, j, pos, v = rnd.choice(choices)
    assert not check_list_append(History(_set_read(ops, i, j, v[:pos] + v[pos + 1 :]))).valid


@settings(max_examples=50)  # each mutation needs a history that allows it
@given(append_histories(), st.randoms(use_true_random=False))
def test_swapped_elements_are_flagged(ops: list[Op], rnd: random.Random) -> None:
    """A read with two neighbours swapped (another read shows both) is flagged."""
    choices = _shown_elsewhere(_reads(ops), spare=1)
    assume(choices)
    i, j, pos, v = rnd.choice(choices)
    swapped = [*v[:pos], v[pos + 1], v[pos], *v[pos + 2 :]]
    assert not check_list_append(History(_set_read(ops, i, j, swapped))).valid


@settings(max_examples=50)  # each mutation needs a history that allows it
@given(append_histories(), st.randoms(use_true_random=False))
def test_a_read_missing_an_acknowledged_append_is_flagged(
    ops: list[Op], rnd: random.Random
) -> None:
    """Cut a transaction's first read of a key just before an element whose transaction had
    completed before it began (and that another read shows, or nothing orders it): a
    real-time cycle (or an internal contradiction) follows."""
    start: dict[Any, int] = {}
    started: dict[int, int] = {}  # op position of a completion -> its invocation's position
    for i, o in enumerate(ops):
        if o.type == "invoke":
            start[o.process] = i
        else:
            started[i] = start[o.process]
    done_at = {
        m[2]: i for i, o in enumerate(ops) if o.type == "ok" for m in o.value if m[0] == "append"
    }
    reads = _reads(ops)
    choices = []
    for i, o in enumerate(ops):
        if o.type != "ok":
            continue
        first: set[str] = set()
        for j, (f, k, v) in enumerate(o.value):
            if f == "r" and k not in first:
                for pos, x in enumerate(v):
                    shown = any(
                        k2 == k and x in v2 and (i2, j2) != (i, j) for i2, j2, k2, v2 in reads
                    )
                    if x in done_at and done_at[x] < started[i] and shown:
                        choices.append((i, j, v[:pos]))
                        break
            first.add(k)
    assume(choices)
    i, j, cut = rnd.choice(choices)
    assert not check_list_append(History(_set_read(ops, i, j, cut))).valid


@settings(max_examples=50)  # each mutation needs a history that allows it
@given(append_histories(), st.randoms(use_true_random=False))
def test_a_read_of_a_failed_append_is_flagged(ops: list[Op], rnd: random.Random) -> None:
    """Turning the txn behind an element another txn read into a failure makes that read G1a."""
    read = {(i, x) for i, _, _, v in _reads(ops) for x in v}  # (reader, element)
    appended_by = {
        m[2]: i
        for i, o in enumerate(ops)
        if o.type in ("ok", "info")
        for m in o.value
        if m[0] == "append"
    }
    choices = sorted({appended_by[x] for i, x in read if appended_by.get(x, i) != i})
    assume(choices)
    i = rnd.choice(choices)
    o = ops[i]
    invoked = [[f, k, None if f == "r" else v] for f, k, v in o.value]
    bad = [*ops[:i], Op("fail", o.process, "txn", invoked, o.time), *ops[i + 1 :]]
    assert "G1a" in check_list_append(History(bad)).kinds()


# -- a real store -------------------------------------------------------------------------------


def test_merges_and_transactions_on_a_sqlite_store_pass(tmp_path: Path) -> None:
    """Three threads appending by merge and by optimistic multi-key transaction, and reading
    from snapshots, on one SQLite store: the recorded history is strict serializable."""
    store = Store(f"sqlite:///{tmp_path / 'lists.db'}")
    store.declare_merge("m/*", "append")
    rec = Recorder(name="lists")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        rnd = random.Random(n)
        c = rec.client()
        try:
            for i in range(30):
                roll = rnd.random()
                if roll < 0.3:
                    record_append(c, store, rnd.choice(["m/a", "m/b"]), f"{n}-{i}")
                elif roll < 0.6:
                    k1, k2 = rnd.sample(["p/a", "p/b", "p/c"], 2)
                    record_append_txn(c, store, [(k1, f"{n}-{i}"), (k2, f"{n}-{i}")])
                else:
                    record_list_read(c, store, ["m/a", "m/b", "p/a", "p/b", "p/c"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    store.close()
    assert not errors, errors
    h = rec.history()
    res = check_list_append(h)
    assert res.valid, res
    assert res.stats["ok"] > 60 and res.stats["keys"] == 5
