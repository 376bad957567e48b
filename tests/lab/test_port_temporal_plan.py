"""durable.port's Temporal part: which kill runs each mode plans, and how it is turned off."""

from __future__ import annotations

import pytest

import surefoot_lab as lab
from surefoot.errors import ConfigError
from surefoot_lab.durable import _temporal_rows as tr


def test_quick_and_full_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quick: the given points and one server kill; full adds reply kills and the defaults."""
    monkeypatch.delenv(tr.MODE_ENV, raising=False)
    server = (tr.SERVER_KILL_AT, "server", "request", "tuned")
    with lab.context(quick=True) as ctx:
        assert tr.temporal_plan(ctx, ("read",)) == [("read", "worker", "request", "tuned"), server]
    with lab.context(quick=False) as ctx:
        full = tr.temporal_plan(ctx, ("search", "approve"))
        assert full[0] == ("search", "worker", "request", "tuned") and full[-1] == server
        assert ("publish", "worker", "reply", "tuned") in full
        assert {k for k, _, _, t in full if t == "defaults"} == {"summarize", "approve"}
        assert len(tr.temporal_plan(ctx, ("search", "approve"), mode="quick")) == 3
        monkeypatch.setenv(tr.MODE_ENV, "quick")
        assert len(tr.temporal_plan(ctx, ("search", "approve"))) == 3


def test_mode_env_off_and_bad(monkeypatch: pytest.MonkeyPatch) -> None:
    """SUREFOOT_LAB_TEMPORAL=off skips the Temporal part by name; an unknown value is refused."""
    monkeypatch.setenv(tr.MODE_ENV, "off")
    assert tr.skipped_reason() == "SUREFOOT_LAB_TEMPORAL=off"
    monkeypatch.setenv(tr.MODE_ENV, "sometimes")
    with lab.context(quick=False) as ctx, pytest.raises(ConfigError, match="'sometimes'"):
        tr.temporal_plan(ctx, ("read",))
