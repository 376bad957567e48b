"""check_register: linearizability of versioned reads, writes and compare-and-set, shown able
to fail on a hand-made history of every anomaly it names, and to pass valid ones."""

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
from surefoot.testing.checkers import check_register
from surefoot.testing.history import History, Op, Recorder, record_read, record_write


def H(text: str) -> History:
    """A hand-written history: one JSON object a line, in real-time order."""
    return History.loads(text)


def w(p: Any, value: Any, expect: int | None = None, key: str = "x") -> str:
    return json.dumps(
        {
            "type": "invoke",
            "process": p,
            "f": "write",
            "value": {"key": key, "value": value, "expect": expect},
        }
    )


def w_ok(p: Any, value: Any, version: int, expect: int | None = None, key: str = "x") -> str:
    v = {"key": key, "value": value, "expect": expect, "version": version}
    return json.dumps({"type": "ok", "process": p, "f": "write", "value": v})


def w_end(kind: str, p: Any, value: Any, expect: int | None = None, **extra: Any) -> str:
    v = {"key": "x", "value": value, "expect": expect, **extra}
    return json.dumps({"type": kind, "process": p, "f": "write", "value": v})


def r(p: Any, key: str = "x") -> str:
    return json.dumps({"type": "invoke", "process": p, "f": "read", "value": {"key": key}})


def r_ok(p: Any, version: int, value: Any, key: str = "x") -> str:
    v = {"key": key, "version": version, "value": value}
    return json.dumps({"type": "ok", "process": p, "f": "read", "value": v})


def lines(*ls: str) -> History:
    return H("\n".join(ls))


# -- valid histories pass ------------------------------------------------------------------


def test_concurrent_reads_may_see_either_side_of_a_write() -> None:
    """Reads overlapping a write may return the old or the new version."""
    h = lines(
        w(0, "a", 0),
        r(1),
        r(2),
        r_ok(1, 1, "a"),
        r_ok(2, 0, None),
        w_ok(0, "a", 1, 0),
    )
    res = check_register(h)
    assert res.valid, res


def test_unknown_write_seen_by_a_read_is_resolved_as_applied() -> None:
    """An info write whose value is read happened: valid, and counted as seen."""
    h = lines(w(0, "a"), w_end("info", 0, "a"), r(1), r_ok(1, 1, "a"))
    res = check_register(h)
    assert res.valid, res
    assert res.stats["unknown_writes"] == 1 and res.stats["unknown_seen"] == 1


def test_unknown_write_never_seen_may_not_have_happened() -> None:
    """An info write nobody observed leaves the history valid."""
    h = lines(w(0, "a", 0), w_end("info", 0, "a", 0), r(1), r_ok(1, 0, None))
    assert check_register(h).valid


def test_unknown_write_fills_a_version_nobody_saw_made() -> None:
    """Version 2 made by an ok write implies version 1: an info write made it."""
    h = lines(w(0, "a"), w_end("info", 0, "a"), w(1, "b", 1), w_ok(1, "b", 2, 1))
    res = check_register(h)
    assert res.valid, res
    assert res.stats["unknown_needed"] == 1


def test_refused_compare_and_set_is_a_read_of_the_version_found() -> None:
    """A ConflictError carrying the current version is consistent with the writes."""
    h = lines(w(0, "a", 0), w_ok(0, "a", 1, 0), w(1, "b", 0), w_end("fail", 1, "b", 0, current=1))
    assert check_register(h).valid


def test_keys_are_checked_apart() -> None:
    """Versions of two keys never constrain each other."""
    h = lines(
        w(0, "a", 0, key="x"),
        w_ok(0, "a", 1, 0, key="x"),
        r(1, key="y"),
        r_ok(1, 0, None, key="y"),
    )
    assert check_register(h).valid


# -- every anomaly is flagged ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "history"),
    [
        # a read began after version 1 was acknowledged, yet saw version 0
        ("stale-read", [w(0, "a", 0), w_ok(0, "a", 1, 0), r(1), r_ok(1, 0, None)]),
        # a write began after a read saw version 2, yet made version 1
        (
            "real-time",
            [w(0, "a"), w_ok(0, "a", 2), r(1), r_ok(1, 2, "a"), w(2, "b"), w_ok(2, "b", 1)],
        ),
        # two acknowledged writes made the same version
        ("duplicate-version", [w(0, "a", 0), w(1, "b", 0), w_ok(0, "a", 1, 0), w_ok(1, "b", 1, 0)]),
        # a compare-and-set expecting 0 made version 2
        ("cas-wrong-version", [w(0, "a"), w_ok(0, "a", 1), w(1, "b", 0), w_ok(1, "b", 2, 0)]),
        # a compare-and-set refused although the version it expected was current
        (
            "cas-refused",
            [w(0, "a"), w_ok(0, "a", 1), w(1, "b", 1), w_end("fail", 1, "b", 1, current=1)],
        ),
        # version 1 was written as "a" but read as "b", which was written as version 2
        (
            "wrong-value",
            [w(0, "a"), w_ok(0, "a", 1), w(1, "b"), w_ok(1, "b", 2), r(2), r_ok(2, 1, "b")],
        ),
        # a value nobody wrote
        ("garbage-read", [w(0, "a"), w_ok(0, "a", 1), r(1), r_ok(1, 2, "zz")]),
        # the value of a write that failed
        (
            "aborted-read",
            [w(0, "a", 0), w_end("fail", 0, "a", 0, current=0), r(1), r_ok(1, 1, "a")],
        ),
        # an unknown write's value read at two versions: it was applied twice
        (
            "applied-twice",
            [
                w(0, "a"),
                w_end("info", 0, "a"),
                w(1, "b"),
                w_ok(1, "b", 2),
                r(2),
                r_ok(2, 1, "a"),
                r(3),
                r_ok(3, 3, "a"),
            ],
        ),
        # version 3 made, but only two writes exist
        ("phantom-version", [w(0, "a"), w_ok(0, "a", 1), w(1, "b"), w_ok(1, "b", 3)]),
        # an unknown write invoked only after version 2 was observed cannot have made version 1
        ("phantom-version", [w(0, "b"), w_ok(0, "b", 2), w(1, "a"), w_end("info", 1, "a")]),
        # a read of version 0 (absent) with a value
        ("wrong-value", [r(0), r_ok(0, 0, "a")]),
    ],
)
def test_each_anomaly_is_flagged(kind: str, history: list[str]) -> None:
    """The hand-made history of each anomaly class is invalid, with that class named."""
    res = check_register(lines(*history))
    assert not res.valid
    assert kind in res.kinds(), res
    anomaly = next(a for a in res.anomalies if a.kind == kind)
    assert anomaly.ops and anomaly.key == "x" and "key 'x'" in anomaly.explanation


def test_stale_read_names_the_operation_that_had_seen_newer() -> None:
    """The explanation says which completed operation the read should have seen."""
    res = check_register(lines(w(0, "a", 0), w_ok(0, "a", 1, 0), r(1), r_ok(1, 0, None)))
    (a,) = res.anomalies
    assert "ok write by process 0 (index 1)" in a.explanation
    assert [o.index for o in a.ops] == [1, 3]


def test_writes_of_one_value_twice_cannot_be_checked() -> None:
    """The method needs unique values per key; a repeated one is a clear error."""
    with pytest.raises(ConfigError, match="unique values"):
        check_register(lines(w(0, "a"), w_ok(0, "a", 1), w(1, "a"), w_ok(1, "a", 2)))


# -- property tests: valid histories pass, broken ones do not -----------------------------------


@st.composite
def register_histories(draw: st.DrawFn) -> list[Op]:
    """Reads, blind writes and compare-and-sets (expecting the current version or an older
    one) of two keys, run against a dict at their linearization points, interleaved."""
    model: dict[str, tuple[int, Any]] = {}
    written = [0]

    def new_op(draw: st.DrawFn) -> tuple[str, Any]:
        key = draw(st.sampled_from(["x", "y"]))
        if draw(st.booleans()):
            return "read", {"key": key}
        written[0] += 1
        cur = model.get(key, (0, None))[0]
        expect = draw(st.sampled_from([None, cur, max(0, cur - 1)]))
        return "write", {"key": key, "value": f"v{written[0]}", "expect": expect}

    def apply(draw: st.DrawFn, f: str, arg: dict[str, Any]) -> tuple[str, Any]:
        version, value = model.get(arg["key"], (0, None))
        if f == "read":
            return "ok", {**arg, "version": version, "value": value}
        if arg["expect"] is not None and arg["expect"] != version:
            return "fail", {**arg, "current": version}
        model[arg["key"]] = (version + 1, arg["value"])
        return "ok", {**arg, "version": version + 1}

    return interleave(draw, new_op, apply)


@given(register_histories())
def test_valid_generated_histories_pass(ops: list[Op]) -> None:
    """Every history of a linearizable register, however interleaved, is accepted."""
    res = check_register(History(ops))
    assert res.valid, res


def _completed(ops: list[Op], f: str) -> list[tuple[int, int]]:
    """(invoke index, ok index) of each ok operation of ``f``."""
    started: dict[Any, int] = {}
    out = []
    for i, o in enumerate(ops):
        if o.type == "invoke":
            started[o.process] = i
        elif o.type == "ok" and o.f == f:
            out.append((started[o.process], i))
    return out


def _with(ops: list[Op], i: int, value: dict[str, Any]) -> list[Op]:
    o = ops[i]
    return [*ops[:i], Op(o.type, o.process, o.f, value, o.time), *ops[i + 1 :]]


@settings(max_examples=50)  # each mutation needs a history that allows it
@given(register_histories(), st.randoms(use_true_random=False))
def test_swapped_versions_of_ordered_writes_are_flagged(ops: list[Op], rnd: random.Random) -> None:
    """Swapping the versions of two writes of a key, one acknowledged before the other began,
    breaks real-time order: always flagged."""
    writes = _completed(ops, "write")
    ordered = [
        (a, b)
        for a in writes
        for b in writes
        if a[1] < b[0] and ops[a[1]].value["key"] == ops[b[1]].value["key"]
    ]
    assume(ordered)
    (_, ea), (_, eb) = rnd.choice(ordered)
    va, vb = ops[ea].value, ops[eb].value
    bad = _with(
        _with(ops, ea, {**va, "version": vb["version"]}), eb, {**vb, "version": va["version"]}
    )
    assert not check_register(History(bad)).valid


@settings(max_examples=50)  # each mutation needs a history that allows it
@given(register_histories(), st.randoms(use_true_random=False))
def test_a_read_turned_stale_is_flagged(ops: list[Op], rnd: random.Random) -> None:
    """A read changed to return the version before one already observed by an operation that
    completed before it began is flagged."""
    observed = [(s, e, ops[e].value) for f in ("read", "write") for s, e in _completed(ops, f)]
    reads = _completed(ops, "read")
    made = {
        (o.value["key"], o.value["version"]): o.value["value"]
        for o in ops
        if o.type == "ok" and o.f == "write"
    }
    candidates = []
    for s, e in reads:
        key, v = ops[e].value["key"], ops[e].value["version"]
        newer_seen = any(
            e2 < s and val["key"] == key and val["version"] >= v for _, e2, val in observed
        )
        if v >= 1 and newer_seen and (v == 1 or (key, v - 1) in made):
            candidates.append(e)
    assume(candidates)
    e = rnd.choice(candidates)
    key, v = ops[e].value["key"], ops[e].value["version"]
    bad = _with(ops, e, {"key": key, "version": v - 1, "value": made.get((key, v - 1))})
    assert "stale-read" in check_register(History(bad)).kinds()


@settings(max_examples=50)  # each mutation needs a history that allows it
@given(register_histories(), st.randoms(use_true_random=False))
def test_a_read_of_an_unwritten_value_is_flagged(ops: list[Op], rnd: random.Random) -> None:
    """Replacing what a read returned with a value nobody wrote is flagged."""
    reads = [e for _, e in _completed(ops, "read") if ops[e].value["version"] >= 1]
    assume(reads)
    e = rnd.choice(reads)
    bad = _with(ops, e, {**ops[e].value, "value": "never-written"})
    assert not check_register(History(bad)).valid


# -- a real store, three threads ---------------------------------------------------------------


class IgnoresExpect:
    """A broken client: it writes blindly whatever version it was told to expect."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def read(self, key: str) -> Any:
        return self.store.read(key)

    def write(self, key: str, value: Any, *, expect: int | None = None) -> Any:
        return self.store.write(key, value)


def race(store: Any, rec: Recorder, rounds: int) -> None:
    """Three threads each round read the key, wait for each other, then compare-and-set."""
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            c = rec.client()
            for i in range(rounds):
                seen = record_read(c, store, "k").value["version"]
                barrier.wait(timeout=30)
                record_write(c, store, "k", f"t{n}-{i}", expect=seen)
                barrier.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_three_threads_on_a_sqlite_store_are_linearizable(tmp_path: Path) -> None:
    """Recorded reads and compare-and-sets of three threads on SQLite pass the checker: per
    round one write wins and two are refused with the version found."""
    store = Store(f"sqlite:///{tmp_path / 'reg.db'}")
    rec = Recorder(tmp_path / "hist.jsonl", name="demo")
    try:
        race(store, rec, rounds=10)
    finally:
        rec.close()
        store.close()
    h = History.load(tmp_path / "hist.jsonl")
    res = check_register(h)
    assert res.valid, res
    kinds = [p.type for p in h.pairs() if p.f == "write"]
    assert kinds.count("ok") == 10 and kinds.count("fail") == 20


def test_a_client_that_ignores_expect_is_flagged(tmp_path: Path) -> None:
    """The same race through a client that drops ``expect``: every round two writes land
    over a version they did not expect, and the checker says so."""
    store = Store(f"sqlite:///{tmp_path / 'reg.db'}")
    rec = Recorder(name="broken")
    try:
        race(IgnoresExpect(store), rec, rounds=5)
    finally:
        store.close()
    res = check_register(rec.history())
    assert res.kinds().get("cas-wrong-version") == 10, res
