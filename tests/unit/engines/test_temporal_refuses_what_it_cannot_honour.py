"""What Temporal cannot honour is refused with a clear error before anything reaches the
cluster (the URL's port 1 has no server: a call that got that far would fail differently):
recovery strategies other than journal_keys, crash plans, fake clocks, sync workflows; and
`surefoot ui` on a temporal:// URL. The refusals name Temporal, not a class."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("temporalio")

from surefoot import FakeClock, durable
from surefoot.cli import main
from surefoot.durable import CrashPlan
from surefoot.errors import ConfigError

URL = "temporal://127.0.0.1:1?task_queue=t"


def app_with(**kw: Any) -> durable.App:
    app = durable.App(URL, **kw)

    @app.workflow(version="1")
    async def wf() -> str:
        return "x"

    @app.workflow(version="1")
    def plain() -> str:
        return "x"

    return app


@pytest.mark.parametrize("strategy", ["restart", "journal"])
@pytest.mark.parametrize("how", ["start", "enqueue"])
def test_a_strategy_other_than_journal_keys_is_refused(strategy: str, how: str) -> None:
    """start/enqueue(strategy='restart'|'journal') on Temporal: refused, naming it."""
    app = app_with()
    with pytest.raises(ConfigError, match=f"strategy='{strategy}' is not supported on Temporal"):
        getattr(app, how)("wf", run_id="r-1", strategy=strategy)
    app.close()


def test_journal_keys_is_what_temporal_does_so_it_is_accepted_as_far_as_the_cluster() -> None:
    """strategy='journal_keys' passes the check: the call fails only on the missing server."""
    from surefoot.errors import StoreUnavailableError

    app = app_with()
    with pytest.raises(StoreUnavailableError):
        app.enqueue("wf", run_id="r-1", strategy="journal_keys")
    app.close()


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"strategy": "restart"}, "App(strategy='restart') is not supported on Temporal"),
        ({"crash": CrashPlan("before_step")}, "no crash points on Temporal"),
        ({"clock": FakeClock()}, "App(clock=FakeClock(...)) cannot drive Temporal"),
    ],
)
def test_an_app_option_temporal_would_ignore_is_refused(kw: dict[str, Any], needle: str) -> None:
    """App(strategy=/crash=/clock=) on a temporal:// URL: refused at the first call."""
    app = app_with(**kw)
    with pytest.raises(ConfigError) as info:
        app.start("wf", run_id="r-1")
    assert needle in str(info.value)
    app.close()


def test_a_crash_plan_from_the_environment_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """SUREFOOT_CRASH set for a temporal:// app is the same CrashPlan: refused."""
    monkeypatch.setenv("SUREFOOT_CRASH", "before_step")
    app = app_with()
    with pytest.raises(ConfigError, match="SUREFOOT_CRASH"):
        app.enqueue("wf", run_id="r-1")
    app.close()


@pytest.mark.parametrize("how", ["start", "enqueue"])
def test_a_sync_workflow_is_refused_before_its_run_id_is_used(how: str) -> None:
    """A plain (sync) workflow is refused at start, before the cluster is asked for its id."""
    app = app_with()
    with pytest.raises(ConfigError, match="'plain' is a plain \\(sync\\) function"):
        getattr(app, how)("plain", run_id="r-1")
    app.close()


def test_queue_options_are_refused_naming_temporal_not_a_class() -> None:
    """The refusal says 'on Temporal', not 'on the TemporalEngine engine'."""
    app = app_with()
    with pytest.raises(ConfigError) as info:
        app.enqueue("wf", run_id="r-1", priority=3)
    assert "not supported on Temporal yet" in str(info.value)
    assert "TemporalEngine" not in str(info.value)
    app.close()


def test_ui_on_a_temporal_url_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`surefoot ui --db temporal://…` says where runs on Temporal are seen, and serves
    nothing (it used to announce a URL and answer HTTP 500)."""
    with pytest.raises(SystemExit) as info:
        main(["ui", "--db", URL, "--port", "0"])
    out = capsys.readouterr()
    assert info.value.code == 1 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "Temporal's own UI" in lines[0], out.err
    assert "surefoot engine show" in lines[0]
