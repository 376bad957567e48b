"""A Hypothesis state machine: writes, merges, deletes, expiries and transactions against a
model of the keys and of the change log, on every backend (issue 14)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url
from hypothesis import settings
from hypothesis import strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from surefoot.clock import FakeClock
from surefoot.errors import ConflictError
from surefoot.statebus import Store

KEYS = ["a", "b", "c"]


class KeysVsModel(RuleBasedStateMachine):
    """The model: per key (value, version, live, expires_at); the log as (revision, key,
    kind, version). Expired keys are swept before every change, oldest expiry first."""

    url = "memory://"

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.st = Store(self.url, f"sm-{uuid.uuid4().hex[:10]}", clock=self.clock)
        self.st.declare_merge("n", "add")
        self.st.declare_merge("log", "append")
        self.keys: dict[str, tuple[Any, int, bool, float | None]] = {}
        self.log: list[tuple[int, str, str, int]] = []

    # -- the model -------------------------------------------------------------------------

    def _change(self, key: str, kind: str, value: Any, ttl: float | None = None) -> None:
        version = self.keys.get(key, (None, 0, False, None))[1] + 1
        exp = None if ttl is None else self.clock.now() + ttl
        self.keys[key] = (value, version, kind in ("put", "merge"), exp)
        self.log.append((len(self.log) + 1, key, kind, version))

    def _sweep(self) -> None:
        now = self.clock.now()
        due = sorted(
            (exp, k)
            for k, (_, _, live, exp) in self.keys.items()
            if live and exp is not None and exp <= now
        )
        for _, key in due:
            self._change(key, "expire", None)

    def _version(self, key: str) -> tuple[int, bool]:
        _, version, live, _ = self.keys.get(key, (None, 0, False, None))
        return version, live

    # -- rules -----------------------------------------------------------------------------

    @rule(key=hs.sampled_from(KEYS), v=hs.integers(0, 9), ttl=hs.none() | hs.sampled_from([1, 5]))
    def write(self, key: str, v: int, ttl: float | None) -> None:
        self._sweep()
        e = self.st.write(key, v, ttl=ttl)
        self._change(key, "put", v, ttl)
        assert (e.version, e.revision) == (self.keys[key][1], len(self.log))

    @rule(key=hs.sampled_from(KEYS), v=hs.integers(0, 9), delta=hs.integers(-1, 1))
    def versioned_write(self, key: str, v: int, delta: int) -> None:
        self._sweep()
        version, live = self._version(key)
        shown = version if live else 0
        expect = max(0, shown + delta)
        if expect == shown or (not live and expect == version):
            self.st.write(key, v, expect=expect)
            self._change(key, "put", v)
        else:
            with pytest.raises(ConflictError):
                self.st.write(key, v, expect=expect)

    @rule(n=hs.integers(-3, 3))
    def add(self, n: int) -> None:
        self._sweep()
        cur, _, live, _ = self.keys.get("n", (0, 0, False, None))
        self.st.merge("n", n)
        self._change("n", "merge", (cur if live else 0) + n)

    @rule(item=hs.integers(0, 9))
    def append(self, item: int) -> None:
        self._sweep()
        cur, _, live, _ = self.keys.get("log", ([], 0, False, None))
        self.st.merge("log", item)
        self._change("log", "merge", [*(cur if live else []), item])

    @rule(key=hs.sampled_from([*KEYS, "n", "log"]), delta=hs.none() | hs.integers(-1, 1))
    def delete(self, key: str, delta: int | None) -> None:
        self._sweep()
        version, live = self._version(key)
        expect = None if delta is None else max(0, (version if live else 0) + delta)
        ok = (
            expect is None or expect == (version if live else 0) or (not live and expect == version)
        )
        if not ok:
            with pytest.raises(ConflictError):
                self.st.delete(key, expect=expect)
            return
        ch = self.st.delete(key, expect=expect)
        assert (ch is not None) == live
        if live:
            self._change(key, "delete", None)

    @rule(seconds=hs.sampled_from([0.5, 2, 6]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(
        stale=hs.sampled_from([None, *KEYS]),
        puts=hs.lists(hs.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
        drop=hs.sampled_from(KEYS),
    )
    def txn(self, stale: str | None, puts: list[str], drop: str) -> None:
        self._sweep()
        compare = {}
        for key in KEYS:
            version, live = self._version(key)
            compare[key] = version if live else 0
        if stale is not None:
            compare[stale] += 1
        success = [("put", k, f"t{k}") for k in puts]
        failure = [] if drop in puts else [("delete", drop)]
        r = self.st.txn(compare, success, failure)
        assert r.succeeded == (stale is None)
        if r.succeeded:
            for k in puts:
                self._change(k, "put", f"t{k}")
        else:
            assert r.conflict is not None and r.conflict.key == stale
            if failure and self._version(drop)[1]:
                self._change(drop, "delete", None)
        made = [(c.revision, c.key, c.kind, c.version) for c in r.changes]
        assert made == self.log[len(self.log) - len(made) :]

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def agrees(self) -> None:
        got = [(c.revision, c.key, c.kind, c.version) for c in self.st.watch(timeout=0)]
        self._sweep()  # the watch swept what was due before it read the log
        assert got == self.log
        live = {k: v for k, (v, _, alive, _) in self.keys.items() if alive}
        assert {k: e.value for k, e in self.st.snapshot().items()} == live
        assert self.st.revision == len(self.log)

    def teardown(self) -> None:
        self.st.close()


@pytest.mark.parametrize("kind", BACKENDS)
def test_keys_history_and_transactions_agree_with_a_model(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Any sequence of writes, merges, deletes, expiries and transactions leaves the backend's
    keys and change log equal to the model's (fewer examples on the servers, to stay fast)."""
    url = backend_url(kind, tmp_path, request, "smh")
    machine = type(f"KeysVsModel_{kind}", (KeysVsModel,), {"url": url})
    examples = 25 if kind in ("memory", "sqlite") else 8
    machine.TestCase.settings = settings(
        max_examples=examples, stateful_step_count=20, deadline=None
    )
    machine.TestCase().runTest()
