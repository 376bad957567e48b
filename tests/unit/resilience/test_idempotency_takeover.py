"""A holder whose claim was taken over while its action ran (it was paused past its lease,
its clock ran slow): the key keeps one answer, the one saved by the holder that completed."""

from __future__ import annotations

from pathlib import Path

import pytest

from surefoot import FakeClock, storage
from surefoot.errors import IdempotencyInProgressError
from surefoot.resilience import IdempotentExecutor


def test_a_stale_holder_returns_the_saved_answer_not_its_own(tmp_path: Path) -> None:
    """A claims k (lease 1 s); while its action runs, 2 s pass, B takes the key over and
    saves "B". A's action then returns "A": its completion is refused, and A's caller gets
    the key's saved answer "B", so every caller of k sees one answer."""
    clock = FakeClock()
    st = storage.open(f"sqlite:///{tmp_path / 'keys.db'}")
    a = IdempotentExecutor(st, lease=1, clock=clock)
    b = IdempotentExecutor(st, lease=1, clock=clock)
    ran: list[str] = []

    def charge() -> str:  # one action, as a retry of the same request is (keys bind it)
        if not ran:
            ran.append("A")
            clock.advance(2)  # A is paused past its lease; B takes over meanwhile
            assert b.run("k", charge) == "B"
            return "A"
        ran.append("B")
        return "B"

    assert a.run("k", charge) == "B"
    assert ran == ["A", "B"]  # the action ran twice (the documented takeover)...
    assert a.run("k", charge) == "B"  # ...and the key has one answer, not run again
    assert ran == ["A", "B"]
    rec = st.keystore().get("k")
    assert rec is not None and rec.result == '"B"'
    st.close()


def test_a_stale_holder_whose_key_is_still_running_elsewhere_is_told(tmp_path: Path) -> None:
    """If the new holder has not finished yet, the stale holder raises
    IdempotencyInProgressError saying its claim was taken over, rather than answering."""
    clock = FakeClock()
    st = storage.open(f"sqlite:///{tmp_path / 'keys.db'}")
    a = IdempotentExecutor(st, lease=1, clock=clock)
    other = st.keystore()

    def act_a() -> str:
        clock.advance(2)
        now = clock.now()
        claimed, _ = other.claim("k", a.store.get("k").fingerprint, "someone", now, now + 60)  # type: ignore[union-attr]
        assert claimed
        return "A"

    with pytest.raises(IdempotencyInProgressError, match="taken over"):
        a.run("k", act_a)
    st.close()
