"""Fault injectors and the counting wrapper."""

from __future__ import annotations

import pytest

from surefoot import ConfigError, FakeClock
from surefoot.errors import TimeoutError_
from surefoot.resilience import ProviderError, ReplyLostError, faults


def test_outage_fails_exactly_the_window() -> None:
    """Requests start..end (inclusive) fail; the others pass."""
    svc = faults.wrap(lambda: "ok", faults.Outage(3, 5))
    outcomes = []
    for _ in range(7):
        try:
            svc()
            outcomes.append("ok")
        except ProviderError as e:
            outcomes.append(e.status_code)
    assert outcomes == ["ok", "ok", 503, 503, 503, "ok", "ok"]
    assert (svc.calls, svc.effects, svc.errors) == (7, 4, 3)


def test_slow_sequence_and_timeout_cut() -> None:
    """Request n takes seconds[n-1]; a timeout cuts it and the clock moves by the timeout."""
    clock = FakeClock()
    svc = faults.wrap(lambda: "ok", faults.Slow([5.0, 0.1]), clock=clock)
    with pytest.raises(TimeoutError_):
        svc(timeout=1.0)
    assert clock.elapsed == 1.0
    assert svc(timeout=1.0) == "ok"
    assert clock.elapsed == pytest.approx(1.1)
    assert svc.effects == 1


def test_drop_reply_first_per_key_runs_the_effect() -> None:
    """The first request per key takes effect but its reply is lost; later ones return."""
    done: list[int] = []
    svc = faults.wrap(lambda x: done.append(x) or x, faults.DropReply(first_per_key=True))
    with pytest.raises(ReplyLostError):
        svc(1, key="a")
    assert svc(1, key="a") == 1
    assert done == [1, 1] and svc.lost_replies == 1


def test_chain_first_error_wins_and_delays_add() -> None:
    """Chain raises the first error and adds up delays."""
    clock = FakeClock()
    inj = faults.chain(faults.Slow(1.0), faults.Slow(2.0), faults.Script([500, 404]))
    svc = faults.wrap(lambda: "ok", inj, clock=clock)
    with pytest.raises(ProviderError) as info:
        svc()
    assert info.value.status_code == 500 and clock.elapsed == 3.0


def test_script_copies_exceptions_per_request() -> None:
    """A scripted exception is raised as a fresh object each time."""
    err = ProviderError(429, {"retry-after": "1"})
    inj = faults.Script([err, err])
    a, b = inj.plan(1), inj.plan(2)
    assert a is not None and b is not None and a.error is not b.error
    assert isinstance(a.error, ProviderError) and a.error.headers == {"retry-after": "1"}


def test_bad_parameters_raise_config_error() -> None:
    """Fractions outside 0..1, empty slow lists and inverted outages are rejected."""
    with pytest.raises(ConfigError, match="fraction"):
        faults.FailFraction(1.5)
    with pytest.raises(ConfigError, match="outage"):
        faults.Outage(5, 3)
    with pytest.raises(ConfigError, match="slow"):
        faults.Slow([])
    with pytest.raises(TypeError):
        faults.wrap(42)  # type: ignore[arg-type]
