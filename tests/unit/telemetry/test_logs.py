"""Logging: surefoot.* names, one line per event, JSON lines, secrets never written."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest

from surefoot import FakeClock, telemetry
from surefoot.resilience import CircuitBreaker, ProviderError

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def test_get_logger_refuses_names_outside_surefoot() -> None:
    """A logger name outside ``surefoot.*`` is refused with the name in the message."""
    with pytest.raises(ValueError, match="'myapp'"):
        telemetry.get_logger("myapp")


def test_log_event_reads_as_event_then_fields(caplog: pytest.LogCaptureFixture) -> None:
    """An event logs ``event k=v …`` and carries the fields as structure; None is left out."""
    log = telemetry.get_logger("surefoot.test")
    with caplog.at_level(logging.INFO, logger="surefoot"):
        telemetry.log_event(log, "claimed", run_id="r 1", workflow="wf", step=None, epoch=2)
    (rec,) = caplog.records
    assert rec.getMessage() == 'claimed run_id="r 1" workflow=wf epoch=2'
    assert rec.surefoot == {"event": "claimed", "run_id": "r 1", "workflow": "wf", "epoch": 2}


def test_secrets_are_masked_in_messages_fields_urls_and_exceptions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A key in a message, an argument, a field, a URL password or an exception never shows
    in what a formatter writes (plain or JSON)."""
    log = telemetry.get_logger("surefoot.test.redact")
    with caplog.at_level(logging.DEBUG, logger="surefoot"):
        log.warning("calling with key %s", SECRET)
        log.info("journal postgresql://app:hunter2pass@db:5432/x is down")
        telemetry.log_event(log, "call", api_key="plain-looking-value", note=f"token={SECRET}")
        try:
            raise RuntimeError(f"401 for Authorization: Bearer {SECRET}")
        except RuntimeError:
            log.exception("provider refused")
    plain, as_json = logging.Formatter(), telemetry.JsonFormatter()
    text = caplog.text + "".join(plain.format(r) + as_json.format(r) for r in caplog.records)
    assert SECRET not in text
    assert "hunter2pass" not in text and "plain-looking-value" not in text
    assert "postgresql://app:***@db:5432/x" in text  # the one URL redaction: surefoot.redaction
    assert caplog.records[2].surefoot["api_key"] == "[redacted]"


def test_json_lines_carry_the_event_fields() -> None:
    """configure_logging(format='json') writes one JSON object per line with the fields."""
    out = io.StringIO()
    handler = telemetry.configure_logging(level="INFO", format="json", stream=out)
    try:
        log = telemetry.get_logger("surefoot.durable.worker")
        telemetry.log_event(
            log, "step_done", run_id="r1", workflow="wf", step="charge", worker="w1", secret=SECRET
        )
    finally:
        logging.getLogger("surefoot").removeHandler(handler)
    (line,) = out.getvalue().splitlines()
    data = json.loads(line)
    assert data["event"] == "step_done" and data["run_id"] == "r1" and data["step"] == "charge"
    assert data["worker"] == "w1" and data["logger"] == "surefoot.durable.worker"
    assert data["level"] == "info" and data["secret"] == "[redacted]"
    assert SECRET not in line


def test_configure_logging_refuses_an_unknown_format() -> None:
    """An unknown format names the ones there are."""
    with pytest.raises(ValueError, match="text, json"):
        telemetry.configure_logging(format="xml")


def test_configure_logging_replaces_its_own_handler_only() -> None:
    """Calling it twice leaves one surefoot handler, and a handler the user added stays."""
    root = logging.getLogger("surefoot")
    mine = logging.NullHandler()
    root.addHandler(mine)
    try:
        telemetry.configure_logging(stream=io.StringIO())
        h2 = telemetry.configure_logging(stream=io.StringIO())
        ours = [h for h in root.handlers if getattr(h, "_surefoot_handler", False)]
        assert ours == [h2] and mine in root.handlers
    finally:
        root.removeHandler(mine)
        for h in list(root.handlers):
            if getattr(h, "_surefoot_handler", False):
                root.removeHandler(h)


def test_breaker_transitions_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Opening logs a WARNING naming the breaker; closing again logs INFO."""
    clock = FakeClock()
    b = CircuitBreaker("payments", failure_threshold=1, reset_timeout=5, clock=clock)
    with caplog.at_level(logging.INFO, logger="surefoot.resilience.breaker"):
        with pytest.raises(ProviderError):
            b.call(lambda: (_ for _ in ()).throw(ProviderError(503)))
        clock.advance(5)
        b.call(lambda: "ok")
    events = [(r.levelname, r.surefoot["event"], r.surefoot["breaker"]) for r in caplog.records]
    assert events == [
        ("WARNING", "breaker_open", "payments"),
        ("INFO", "breaker_half_open", "payments"),
        ("INFO", "breaker_closed", "payments"),
    ]


def test_the_worker_command_writes_json_lines_per_run_event(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """surefoot --log-format json worker: one JSON line per run event on stderr."""
    import textwrap
    import uuid

    from surefoot.cli import main

    name = f"log_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from surefoot import durable
            app = durable.App(poll=0.05)

            @app.step
            def plan(q: str) -> str:
                return q.upper()

            @app.workflow
            def research(q: str) -> str:
                return plan(q)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    import importlib

    mod = importlib.import_module(name)
    mod.app.configure(url=db)
    mod.app.enqueue("research", "sky", run_id="j-1")
    mod.app.close()
    root = logging.getLogger("surefoot")
    level = root.level
    try:
        main(
            [
                "--log-format",
                "json",
                "worker",
                "--db",
                db,
                "--app",
                f"{name}:app",
                "--idle-exit",
                "0.5",
                "--worker-id",
                "w-json",
            ]
        )
    finally:
        for h in list(root.handlers):
            if getattr(h, "_surefoot_handler", False):
                root.removeHandler(h)
        root.setLevel(level)
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    got = [(d["event"], d["run_id"], d["worker"]) for d in lines if d.get("run_id") == "j-1"]
    assert got == [
        ("claimed", "j-1", "w-json"),
        ("step_done", "j-1", "w-json"),
        ("finished", "j-1", "w-json"),
    ]
    assert lines[-1]["status"] == "succeeded" and lines[-1]["workflow"] == "research"
