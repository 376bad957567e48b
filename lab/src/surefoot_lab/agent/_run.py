"""Starting agent runs: embedded or for workers, approved by a person or automatically."""

from __future__ import annotations

from typing import Any

from surefoot.durable import App, RunHandle, Workflow

from ._workflow import APPROVE

__all__ = ["approve", "start_agent"]


def approve(app: App, run_id: str, *, by: str = "operator", approved: bool = True) -> bool:
    """Deliver the ``approve`` signal to an agent run (what a person does from the CLI).

    Returns False if this run was already sent this decision (delivered once).
    """
    return app.signal(
        run_id, APPROVE, {"approved": approved, "by": by}, signal_id=f"{APPROVE}:{by}"
    )


def start_agent(
    app: App,
    workflow: Workflow,
    question: str,
    *,
    run_id: str,
    auto_approve: bool = True,
    enqueue: bool = False,
    strategy: str | None = None,
    channels: list[str] | None = None,
    approval_timeout: float | None = None,
) -> RunHandle:
    """Start (or enqueue) one agent run; with ``auto_approve`` its approval is sent at once.

    Auto-approval is a real signal delivered up front: the run still journals its
    ``approve`` wait, and finds the signal waiting instead of suspending.

    Raises:
        RunConflictError / EncodeError / WorkflowNotFoundError: as ``App.start``.
    """
    extra: dict[str, Any] = {}
    if channels is not None:
        extra["channels"] = channels
    if approval_timeout is not None:
        extra["approval_timeout"] = approval_timeout
    begin = app.enqueue if enqueue or auto_approve else app.start
    handle = begin(workflow, question, run_id=run_id, strategy=strategy, **extra)
    if auto_approve:
        approve(app, run_id, by="auto")
        if not enqueue:  # the same run again, executed here now (not an operator's resume)
            handle = app.start(workflow, question, run_id=run_id, strategy=strategy, **extra)
    return handle
