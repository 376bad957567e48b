"""A Hypothesis state machine drives a bounded stream on every backend against a plain
model: appends with ids (retries and reused ids), trims by length and age, the dedup window,
claims by workers that crash (never ack) and redelivery after the visibility timeout, acks,
nacks (with a delay), rejects, dead letters (by max_attempts and by reject) and their redrive,
registrations and removals. After every step the kept messages, the stats, each consumer's
counts and its dead letters (the whole message, reason and attempts) must agree with the
model."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis.strategies as hs
import pytest
from _backends import BACKENDS, backend_url
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from surefoot import storage
from surefoot.errors import DuplicateMessageError, StateError
from surefoot.storage.streams import Retention

RET = Retention(max_messages=3, max_age=30.0, dedup_window=20.0)
VIS = 10.0
MAX_ATTEMPTS = 2


@dataclass
class _C:
    position: int
    pending: dict[int, list[float]] = field(default_factory=dict)  # seq -> [attempts, visible]
    dead: dict[int, tuple[str, int]] = field(default_factory=dict)  # seq -> (reason, attempts)


class StreamVsModel(RuleBasedStateMachine):
    url = "memory://"

    def __init__(self) -> None:
        super().__init__()
        self.st: Any = storage.open(self.url)
        self.log = self.st.stream(f"sm-{uuid.uuid4().hex[:10]}")
        self.now = 1000.0
        self.last = 0
        self.kept: dict[int, tuple[str, str, float]] = {}  # seq -> (id, payload, at)
        self.trimmed: dict[str, tuple[int, str, float]] = {}  # id -> (seq, payload, at)
        self.cons: dict[str, _C] = {}
        self.removed: set[str] = set()  # groups remove_consumer forgot

    # -- the model's rules, written from the documentation ------------------------------

    def _first(self) -> int:
        return min(self.kept) if self.kept else self.last + 1

    def _forget(self) -> None:
        cut = self.now - RET.dedup_window
        self.trimmed = {k: v for k, v in self.trimmed.items() if v[2] >= cut}

    def _trim(self) -> int:
        self._forget()
        if not self.kept:
            return 0
        keep = self.last + 1 - (RET.max_messages or 0)
        assert RET.max_age is not None
        young = [s for s, (_, _, at) in self.kept.items() if at >= self.now - RET.max_age]
        keep = max(keep, min(young) if young else self.last)
        floor = [c.position + 1 for c in self.cons.values()]
        floor += [s for c in self.cons.values() for s in (*c.pending, *c.dead)]
        keep = min([keep, self.last, *floor])
        gone = [s for s in self.kept if s < keep]
        for s in gone:
            mid, body, at = self.kept.pop(s)
            if at >= self.now - RET.dedup_window:
                self.trimmed[mid] = (s, body, at)
        return len(gone)

    def _consumer(self, name: str) -> _C:
        if name not in self.cons:
            self.cons[name] = _C(position=self._first() - 1)
        return self.cons[name]

    # -- rules ----------------------------------------------------------------------------

    ids = hs.sampled_from([f"m{i}" for i in range(6)])
    names = hs.sampled_from(["c1", "c2"])

    @initialize()
    def start(self) -> None:
        """A group and three messages to start from, so the claim, dead-letter and redrive
        rules have something to work on within a short run."""
        self.register("c1")
        for mid in ("m0", "m1", "m2"):
            self.append(mid, '"a"')

    @rule(mid=ids, body=hs.sampled_from(['"a"', '"b"']))
    def append(self, mid: str, body: str) -> None:
        self._forget()
        live = next(((s, p, at) for s, (m, p, at) in self.kept.items() if m == mid), None)
        old = live or self.trimmed.get(mid)
        if old is not None:
            if old[1] != body:
                with pytest.raises(DuplicateMessageError):
                    self.log.append(mid, body, now=self.now, retention=RET)
                return
            rec = self.log.append(mid, body, now=self.now, retention=RET)
            assert (rec.seq, rec.duplicate, rec.appended_at) == (old[0], True, old[2])
            return
        rec = self.log.append(mid, body, now=self.now, retention=RET)
        self.last += 1
        self.kept[self.last] = (mid, body, self.now)
        assert (rec.seq, rec.duplicate) == (self.last, False)
        self._trim()

    @rule()
    def trim(self) -> None:
        assert self.log.trim(RET, now=self.now) == self._trim()

    @rule(dt=hs.sampled_from([1.0, 6.0, 11.0, 25.0]))
    def advance(self, dt: float) -> None:
        self.now += dt

    @rule(name=names)
    def register(self, name: str) -> None:
        self.log.register(name)
        if name in self.removed:  # re-opened after remove_consumer: from the last message
            self.removed.discard(name)
            self.cons.setdefault(name, _C(position=self.last))
        self._consumer(name)

    @rule(name=names)
    def remove(self, name: str) -> None:
        gone = self.cons.pop(name, None) is not None
        assert self.log.remove_consumer(name) == gone
        if gone:
            self.removed.add(name)

    @rule(name=names, limit=hs.integers(1, 3), worker=hs.sampled_from(["w1", "w2"]))
    def claim(self, name: str, limit: int, worker: str) -> None:
        """A worker claims; it may crash (never ack): its claims come due again later."""
        if name not in self.cons and name in self.removed:  # its worker outlived it
            with pytest.raises(StateError, match="was removed"):
                self.log.claim(
                    name, limit=limit, now=self.now, visibility_timeout=VIS, max_attempts=1
                )
            return
        got = self.log.claim(
            name,
            limit=limit,
            now=self.now,
            visibility_timeout=VIS,
            max_attempts=MAX_ATTEMPTS,
            worker=worker,
        )
        c = self._consumer(name)
        want: list[tuple[int, int]] = []
        for seq in sorted(c.pending):
            if len(want) >= limit:
                break
            attempts, visible = c.pending[seq]
            if visible > self.now:
                continue
            if attempts >= MAX_ATTEMPTS:
                del c.pending[seq]
                c.dead[seq] = ("max_attempts", int(attempts))
                continue
            c.pending[seq] = [attempts + 1, self.now + VIS]
            want.append((seq, int(attempts) + 1))
        for seq in sorted(s for s in self.kept if s > c.position):
            if len(want) >= limit:
                break
            c.pending[seq] = [1, self.now + VIS]
            c.position = seq
            want.append((seq, 1))
        assert [(m.record.seq, m.attempt) for m in got] == want
        for m in got:
            assert (m.record.message_id, m.record.payload) == self.kept[m.record.seq][:2]

    def _seq(self, name: str, pick: int, dead: bool = False) -> int:
        """Mostly one of the consumer's pending (or dead) messages, else any seq: rules on
        messages nobody holds would rarely reach the interesting states."""
        c = self.cons.get(name)
        pool = sorted((c.dead if dead else c.pending) if c is not None else ())
        return pool[pick % len(pool)] if pool and pick < 8 else pick + 1

    picks = hs.integers(0, 11)

    @rule(name=names, pick=picks)
    def ack(self, name: str, pick: int) -> None:
        seq = self._seq(name, pick)
        c = self.cons.get(name)
        expected = c is not None and c.pending.pop(seq, None) is not None
        assert self.log.ack(name, seq) == expected

    @rule(name=names, pick=picks, delay=hs.sampled_from([0.0, 5.0, 15.0]))
    def nack(self, name: str, pick: int, delay: float) -> None:
        """A worker hands a message back: visible again after ``delay``, attempts unchanged."""
        seq = self._seq(name, pick)
        c = self.cons.get(name)
        p = c.pending.get(seq) if c is not None else None
        if p is not None:
            p[1] = self.now + delay
        assert self.log.nack(name, seq, now=self.now, delay=delay) == (p is not None)

    @rule(name=names, pick=picks)
    def reject(self, name: str, pick: int) -> None:
        seq = self._seq(name, pick)
        c = self.cons.get(name)
        p = c.pending.pop(seq, None) if c is not None else None
        if p is not None and c is not None:
            c.dead[seq] = ("poison", int(p[0]))
        assert self.log.reject(name, seq, reason="poison", now=self.now) == (p is not None)

    @rule(name=names, picks=hs.one_of(hs.none(), hs.lists(picks, max_size=3)))
    def redrive(self, name: str, picks: list[int] | None) -> None:
        """Dead letters go back once, due now, their attempts counted from 0 again."""
        seqs = None if picks is None else [self._seq(name, p, dead=True) for p in picks]
        c = self.cons.get(name)
        chosen = [] if c is None else sorted(c.dead if seqs is None else set(seqs) & set(c.dead))
        for seq in chosen:
            assert c is not None
            del c.dead[seq]
            c.pending[seq] = [0, self.now]
        assert self.log.redrive(name, seqs, now=self.now) == len(chosen)

    @rule(name=names)
    def poison_then_redrive(self, name: str) -> None:
        """A worker rejects what it claimed, an operator redrives every dead letter, and the
        next claim hands them out again from attempt 1 (the rules above, in one step)."""
        self.claim(name, 1, "w1")
        if name in self.cons and self.cons[name].pending:
            self.reject(name, 0)
            self.redrive(name, None)
            self.claim(name, 3, "w2")

    @rule(name=names, delay=hs.sampled_from([0.0, 5.0]))
    def nack_until_dead(self, name: str, delay: float) -> None:
        """A worker that hands every message back, due again after ``delay`` (and the clock
        moves exactly that far): after ``max_attempts`` deliveries the next claim moves it
        to the dead letters, whole."""
        for _ in range(MAX_ATTEMPTS + 1):
            self.claim(name, 1, "w1")
            if name not in self.cons:
                return
            for pick in range(len(self.cons[name].pending)):
                self.nack(name, pick, delay)
            self.advance(delay)

    @invariant()
    def agrees(self) -> None:
        got = [(r.seq, r.message_id, r.payload, r.appended_at) for r in self.log.range(0, 100)]
        assert got == [(s, *self.kept[s]) for s in sorted(self.kept)]
        s = self.log.stats()
        assert (s.messages, s.last_seq) == (len(self.kept), self.last)
        assert s.first_seq == (min(self.kept) if self.kept else 0)
        assert self.log.last_seq() == self.last
        want = {
            n: (c.position, len(c.pending), len(c.dead), self.last - c.position)
            for n, c in self.cons.items()
        }
        assert {c.name: (c.position, c.pending, c.dead, c.lag) for c in s.consumers} == want
        # a dead letter keeps the whole message, its reason and its attempts
        for n, c in self.cons.items():
            dead = [
                (d.record.seq, d.record.message_id, d.record.payload, d.reason, d.attempts)
                for d in self.log.dead_letters(n)
            ]
            assert dead == [(s, *self.kept[s][:2], *c.dead[s]) for s in sorted(c.dead)]
        # every unsettled message of a known consumer is still readable in full
        for c in self.cons.values():
            assert all(seq in self.kept for seq in (*c.pending, *c.dead))
            assert all(seq in self.kept for seq in range(c.position + 1, self.last + 1))

    def teardown(self) -> None:
        self.st.close()


@pytest.mark.parametrize("kind", BACKENDS)
def test_state_machine_stream_agrees_with_a_model(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Any sequence of appends, retries, trims, claims by crashing workers, acks, nacks,
    rejects, redrives, registrations and removals agrees with the model on this backend."""
    url = backend_url(kind, tmp_path, request, "model")
    machine = type(f"StreamVsModel_{kind}", (StreamVsModel,), {"url": url})
    machine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
    machine.TestCase().runTest()
