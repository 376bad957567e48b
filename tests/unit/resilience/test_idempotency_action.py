"""A key belongs to one action, as a Stripe key belongs to one endpoint: a refund sent with a
charge's key is refused (it would return the charge's result and never run), an abandoned key
is not taken over by another action; include_action=False lets a renamed action keep its keys;
records written before the action was stored are honoured."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from surefoot import FakeClock, codec, storage
from surefoot.errors import IdempotencyConflictError
from surefoot.resilience import IdempotentExecutor, fingerprint

LOG: list[str] = []


def charge(order: str, cents: int) -> dict[str, object]:
    LOG.append(f"charge {order}")
    return {"charged": cents}


def refund(order: str, cents: int) -> dict[str, object]:
    LOG.append(f"refund {order}")
    return {"refunded": cents}


@pytest.fixture(autouse=True)
def _clean_log() -> None:
    LOG.clear()


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL per backend."""
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'k.db'}"


def test_a_key_reused_by_another_action_is_refused_naming_both(url: str) -> None:
    """refund with the charge's key and arguments: a conflict naming the key and both actions;
    the refund's call never returns the charge's result."""
    st = storage.open(url)
    ex = IdempotentExecutor(st)
    assert ex.run("order-7", charge, "o7", 500) == {"charged": 500}
    with pytest.raises(IdempotencyConflictError) as info:
        IdempotentExecutor(st).run("order-7", refund, "o7", 500)
    text = str(info.value)
    assert "'order-7'" in text and "charge" in text and "refund" in text
    assert "include_action=False" in text
    assert LOG == ["charge o7"]
    assert ex.run("order-7", charge, "o7", 500) == {"charged": 500} and LOG == ["charge o7"]
    st.close()


def test_an_abandoned_key_is_not_taken_over_by_another_action(url: str) -> None:
    """A charge whose owner died leaves its key claimed; after the lease, a refund with that
    key is refused, and the charge itself takes the key over and runs."""
    clock = FakeClock()
    st = storage.open(url)
    ks = st.keystore()
    dead = IdempotentExecutor(st, clock=clock, lease=10)
    mine = dead.fingerprint(charge, ("o8", 300), {})  # what the dead owner claimed
    ks.claim("order-8", mine, "dead-owner", clock.now(), clock.now() + 10)
    clock.advance(11)
    ex = IdempotentExecutor(st, clock=clock, lease=10)
    with pytest.raises(IdempotencyConflictError, match="charge"):
        ex.run("order-8", refund, "o8", 300)
    assert LOG == []
    assert ex.run("order-8", charge, "o8", 300) == {"charged": 300} and LOG == ["charge o8"]
    st.close()


def test_async_runs_are_bound_to_their_action_too(url: str) -> None:
    """arun binds the key to the coroutine function the same way."""
    import asyncio

    async def acharge(n: int) -> int:
        return n

    async def arefund(n: int) -> int:
        return -n

    st = storage.open(url)
    ex = IdempotentExecutor(st)
    assert asyncio.run(ex.arun("k", acharge, 1)) == 1
    with pytest.raises(IdempotencyConflictError, match="arefund"):
        asyncio.run(ex.arun("k", arefund, 1))
    st.close()


def test_include_action_false_lets_a_renamed_action_keep_its_keys(url: str) -> None:
    """A deploy that renames its action passes include_action=False: the key replays."""
    st = storage.open(url)
    IdempotentExecutor(st).run("k", charge, "o1", 1)
    again = IdempotentExecutor(st, include_action=False)
    assert again.run("k", refund, "o1", 1) == {"charged": 1} and LOG == ["charge o1"]
    with pytest.raises(IdempotencyConflictError, match="different arguments"):
        again.run("k", refund, "o1", 2)
    st.close()


def test_records_without_an_action_stay_honoured(url: str) -> None:
    """Records written by earlier versions (the arguments only, or the 0.x name+arguments
    hash) replay for the default executor, and a new record is not mistaken for one."""
    clock = FakeClock()
    st = storage.open(url)
    ks = st.keystore()
    args_only = fingerprint(charge, ("o2", 2), {})
    named = fingerprint(charge, ("o2", 2), {}, include_action=True)
    for key, fp in (("args", args_only), ("named", named)):
        ks.claim(key, fp, "old-owner", clock.now(), clock.now() + 300)
        ks.complete(key, "old-owner", codec.dumps({"charged": 2}), None)
    ex = IdempotentExecutor(st, clock=clock)
    assert ex.run("args", charge, "o2", 2) == {"charged": 2}
    assert ex.run("named", charge, "o2", 2) == {"charged": 2}
    assert LOG == [] and ex.replays == 2
    with pytest.raises(IdempotencyConflictError):
        ex.run("args", charge, "o2", 3)
    st.close()


def test_a_partial_is_named_by_the_function_it_wraps(url: str) -> None:
    """functools.partial(charge) and functools.partial(refund) are different actions."""
    st = storage.open(url)
    ex = IdempotentExecutor(st)
    ex.run("k", functools.partial(charge, "o3"), 1)
    with pytest.raises(IdempotencyConflictError, match="refund"):
        ex.run("k", functools.partial(refund, "o3"), 1)
    st.close()
