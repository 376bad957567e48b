"""The Temporal part of ``durable.port``: the agent on a real Temporal dev server, killed.

One dev server (loopback, free ports, a SQLite file in the lab's workdir, WAL) serves
every Temporal row; each row is one agent run with its own task queue, ledger and worker
process (``surefoot_lab.agent.port_temporal``). The worker is SIGKILLed with a step in
flight (or while the run waits for its approval) and started again; once, the server
itself is SIGKILLed and restarted on its file. Rows are dicts shaped like the DBOS and
surefoot rows of ``port.py``, plus Temporal's timings.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from surefoot.engines.temporal import DevServer
from surefoot.errors import ConfigError, MissingExtraError

from .._registry import LabContext
from ..agent.port_temporal import DEFAULTS, TUNED, Tuning, kill_temporal_mid_run, temporalio_module

__all__ = [
    "MODE_ENV",
    "SERVER_KILL_AT",
    "skipped_reason",
    "temporal_plan",
    "temporal_rows",
    "temporal_summary",
]

MODE_ENV = "SUREFOOT_LAB_TEMPORAL"
"""``off``, ``quick`` or ``full`` (the default): how much of the Temporal part to run."""

SERVER_KILL_AT = "summarize"
"""The step in flight when the Temporal server itself is SIGKILLed."""

_TUNINGS = {"tuned": TUNED, "defaults": DEFAULTS}


def temporal_plan(
    ctx: LabContext, points: tuple[str, ...], mode: str | None = None
) -> list[tuple[str, str, str, str]]:
    """The Temporal rows to run: (kill_at, target, window, tuning key), in order.

    ``mode`` (default: ``SUREFOOT_LAB_TEMPORAL``, else ``"full"``) bounds the Temporal
    part: ``"quick"`` runs only the kill points given (tuned) and the server kill, as
    ``--quick`` always does (measured: 2 rows, about 12 s, under ``--quick``; 6 rows,
    about 40 s, in a full run); ``"full"`` (10 rows, about 85 s) adds the reply-window kills of
    ``summarize`` and ``publish`` and Temporal's defaults (no heartbeat, 10 s sticky
    timeout) at ``summarize`` and the approval wait: the two stalls the defaults cause
    (an attempt's start-to-close timeout; the sticky queue), ~13 s a row, which is why
    the defaults are not run at every point.

    Raises:
        ConfigError: an unknown mode.
    """
    mode = mode or os.environ.get(MODE_ENV) or "full"
    if mode not in ("quick", "full"):
        raise ConfigError(f"{MODE_ENV} must be 'quick', 'full' or 'off', got {mode!r}")
    plan = [(k, "worker", "request", "tuned") for k in points]
    if not ctx.quick and mode == "full":
        plan += [("summarize", "worker", "reply", "tuned"), ("publish", "worker", "reply", "tuned")]
        plan += [("summarize", "worker", "request", "defaults")]
        plan += [("approve", "worker", "request", "defaults")]
    plan.append((SERVER_KILL_AT, "server", "request", "tuned"))
    return plan


def _label(kill_at: str, target: str, window: str) -> str:
    if target == "server":
        return f"{kill_at} (server killed)"
    return f"{kill_at} ({'waiting' if kill_at == 'approve' else window})"


def temporal_rows(
    ctx: LabContext,
    plan: list[tuple[str, str, str, str]],
    latency: float,
    tick: Any,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Run ``plan`` on one dev server; ``(rows by "label [tuning]", server facts)``.

    Raises:
        MissingExtraError: ``temporalio`` or the ``temporal`` binary is not installed.
    """
    temporalio_module()
    server = DevServer(ctx.workdir / "temporal.db")
    rows: dict[str, dict[str, Any]] = {}
    try:
        server.start()
        first_ready = server.ready_in_s
        for kill_at, target, window, key in plan:
            tuning: Tuning = _TUNINGS[key]
            name = f"port-temporal-{kill_at}-{target}-{window}-{key}"
            reply = 3 * latency if window == "reply" else 0.0
            r = kill_temporal_mid_run(
                server,
                ctx.workdir / f"{name}-ledger.db",
                kill_at=kill_at,
                target=target,
                window=window,
                tuning=tuning,
                run_id=name,
                seed=ctx.seed,
                latency=latency,
                reply_latency=reply,
                timeout=60.0,
            )
            rows[f"{_label(kill_at, target, window)} [{key}]"] = {
                "tuning": r.tuning,
                "target": r.target,
                "status": r.status,
                "succeeded": r.status == "COMPLETED",
                "journalled_before_kill": r.completed_before_kill,
                "in_flight": r.in_flight,
                "calls_per_step": r.calls_per_step,
                "model_calls": r.model_calls,
                "repeated_for_journalled_steps": r.repeated_for_completed,
                "repeated_after_journal": r.repeated_after_completion,
                "in_flight_calls": r.in_flight_calls,
                "in_flight_attempts": r.in_flight_attempts,
                "duplicate_posts": r.duplicate_posts,
                "posts": r.posts,
                "resumed_in_s": r.resumed_in_s,
                "next_step_in_s": r.next_step_in_s,
                "result_in_s": r.result_in_s,
            }
            tick()
        restarted_ready = server.ready_in_s
    finally:
        server.stop()
    facts = {
        "server": "temporal server start-dev 1.9.1 (Server 1.32.0), SQLite file, WAL, loopback",
        "ready_in_s": None if first_ready is None else round(first_ready, 2),
        "ready_after_restart_s": None if restarted_ready is None else round(restarted_ready, 2),
    }
    return rows, facts


def temporal_summary(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the answer and the acceptance test read: sums over the rows and median times."""

    def values(key: str, tuning: str) -> list[float]:
        return [
            r[key]
            for r in rows.values()
            if r["tuning"] == tuning and r["target"] == "worker" and r[key] is not None
        ]

    def median(key: str, tuning: str) -> float | None:
        v = values(key, tuning)
        return round(statistics.median(v), 2) if v else None

    server = [r for r in rows.values() if r["target"] == "server"]
    in_flight = [r for r in rows.values() if r["in_flight"] != "approve"]
    return {
        "runs": len(rows),
        "all_succeeded": all(r["succeeded"] for r in rows.values()),
        "succeeded": sum(1 for r in rows.values() if r["succeeded"]),
        "repeated_for_journalled_steps": sum(
            r["repeated_for_journalled_steps"] for r in rows.values()
        ),
        "repeated_after_journal": sum(r["repeated_after_journal"] for r in rows.values()),
        "duplicate_posts": sum(r["duplicate_posts"] for r in rows.values()),
        "in_flight_reran": sum(1 for r in in_flight if (r["in_flight_attempts"] or 1) > 1),
        "in_flight_rows": len(in_flight),
        "server_kill_succeeded": bool(server) and all(r["succeeded"] for r in server),
        "resumed_in_s_median": {t.name: median("resumed_in_s", t.name) for t in (TUNED, DEFAULTS)},
        "resumed_kills": {t.name: len(values("resumed_in_s", t.name)) for t in (TUNED, DEFAULTS)},
        "result_in_s_median": {t.name: median("result_in_s", t.name) for t in (TUNED, DEFAULTS)},
        "server_resumed_in_s": server[0]["resumed_in_s"] if server else None,
    }


def skipped_reason() -> str | None:
    """Why the Temporal rows will not run here (None when they will)."""
    if os.environ.get(MODE_ENV) == "off":
        return f"{MODE_ENV}=off"
    try:
        temporalio_module()
        from surefoot.engines.temporal import find_temporal_binary

        find_temporal_binary()
    except MissingExtraError as exc:
        return str(exc)
    return None
