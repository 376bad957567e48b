"""With include_action=False the idempotency fingerprint binds a key to the request (its
arguments) only, so a renamed action keeps its keys; records written by older surefoot are
still honoured; and the executor refuses durations that cannot mean "no limit".
(The default binding of a key to its action: test_idempotency_action.py.)"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from surefoot import FakeClock, codec, storage
from surefoot.errors import ConfigError, IdempotencyConflictError, IdempotencyInProgressError
from surefoot.resilience import IdempotentExecutor, fingerprint

LOG: list[str] = []


def place_order(item: str, n: int) -> dict[str, int]:
    LOG.append(item)
    return {"n": n}


def submit_order(item: str, n: int) -> dict[str, int]:
    """The same action after a rename (or a move to another module)."""
    LOG.append(item)
    return {"n": n}


@pytest.fixture(autouse=True)
def _clean_log() -> None:
    LOG.clear()


def _legacy(action: object, args: tuple[object, ...]) -> str:
    """The fingerprint surefoot wrote before: sha256 of [qualname, args, kwargs]."""
    text = codec.dumps([action.__qualname__, list(args), {}])  # type: ignore[attr-defined]
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL per backend."""
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'k.db'}"


def test_renaming_the_action_keeps_its_keys(url: str) -> None:
    """With include_action=False a retry through a renamed action replays the saved result."""
    st = storage.open(url)
    ex = IdempotentExecutor(st, include_action=False)
    assert ex.run("k1", place_order, "book", 2) == {"n": 2}
    renamed = IdempotentExecutor(st, include_action=False)
    assert renamed.run("k1", submit_order, "book", 2) == {"n": 2}
    assert LOG == ["book"]
    with pytest.raises(IdempotencyConflictError):
        renamed.run("k1", submit_order, "book", 3)
    st.close()


def test_include_action_binds_the_key_to_the_name_too(url: str) -> None:
    """By default (include_action=True) a renamed action reusing a key is a conflict."""
    st = storage.open(url)
    IdempotentExecutor(st).run("k", place_order, "book", 2)
    with pytest.raises(IdempotencyConflictError):
        IdempotentExecutor(st, include_action=True).run("k", submit_order, "book", 2)
    assert fingerprint(place_order, ("b", 1), {}) == fingerprint(submit_order, ("b", 1), {})
    st.close()


def test_records_written_by_older_versions_are_honoured(url: str) -> None:
    """A record holding the old name+arguments fingerprint is the same request: a done one
    replays, a running one is in progress (not a conflict), an abandoned one is taken over
    and run once; other arguments are still a conflict."""
    clock = FakeClock()
    st = storage.open(url)
    ks = st.keystore()
    args = ("book", 2)
    assert fingerprint(place_order, args, {}, include_action=True) == _legacy(place_order, args)
    old = _legacy(place_order, args)
    ks.claim("done", old, "old-owner", clock.now(), clock.now() + 300)
    ks.complete("done", "old-owner", codec.dumps({"n": 2}), None)
    ks.claim("busy", old, "old-owner", clock.now(), clock.now() + 300)
    ks.claim("dead", old, "old-owner", clock.now() - 400, clock.now() - 100)
    ex = IdempotentExecutor(st, clock=clock)
    assert ex.run("done", place_order, "book", 2) == {"n": 2}
    with pytest.raises(IdempotencyInProgressError):
        ex.run("busy", place_order, "book", 2)
    assert ex.run("dead", place_order, "book", 2) == {"n": 2}
    assert LOG == ["book"] and ex.runs == 1
    assert ex.run("dead", place_order, "book", 2) == {"n": 2} and LOG == ["book"]
    with pytest.raises(IdempotencyConflictError):
        ex.run("done", place_order, "book", 3)
    st.close()


def test_switching_include_action_turns_no_key_into_a_conflict(url: str) -> None:
    """Records written without the name are honoured by an executor that includes it."""
    st = storage.open(url)
    IdempotentExecutor(st, include_action=False).run("k", place_order, "book", 2)
    assert IdempotentExecutor(st, include_action=True).run("k", place_order, "book", 2)
    assert LOG == ["book"]
    st.close()


@pytest.mark.parametrize("name", ["lease", "wait_timeout", "poll"])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_durations_are_refused(name: str, value: float) -> None:
    """lease, wait_timeout and poll must be finite: none of them can mean "no limit"."""
    with pytest.raises(ConfigError, match=name):
        IdempotentExecutor("memory://", **{name: value})  # type: ignore[arg-type]


def test_ttl_says_none_is_the_way_to_keep_forever() -> None:
    """ttl=inf is refused with a pointer to ttl=None; poll=0 (a busy wait) is refused."""
    with pytest.raises(ConfigError, match="None for results kept forever"):
        IdempotentExecutor("memory://", ttl=math.inf)
    with pytest.raises(ConfigError, match="poll must be > 0"):
        IdempotentExecutor("memory://", poll=0)
    assert IdempotentExecutor("memory://", ttl=None).ttl is None
