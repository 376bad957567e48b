"""What an execution tells the outside: one log line per run event, metrics, spans, audit.

The executor and the step flow call these hooks; each is a few attribute reads when
nothing listens (``surefoot.durable.worker`` below INFO, no ``telemetry.instrument``).

Log lines (logger ``surefoot.durable.worker``, fields ``run_id``, ``workflow``, ``step``,
``worker`` …): ``claimed``, ``resumed`` (a run with journalled steps, after a suspend),
``taken_over`` (claimed again before its previous execution finished or suspended),
``step_done``, ``step_failed``, ``waiting``, ``fenced``, ``needs_attention``, ``finished``.
Values (arguments, results, payloads) are never logged.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import codec, telemetry

__all__ = ["RunObserver", "attempt_span", "enter_run", "leave_run", "step_span"]

log = telemetry.get_logger("surefoot.durable.worker")
_TRACING = telemetry.TRACING
_STEPS = telemetry.STEPS


class RunObserver:
    """The observation of one execution of one run: its span, its log lines, its claim."""

    __slots__ = (
        "claim",
        "claims",
        "ctx",
        "done_keys",
        "epoch",
        "run_id",
        "span",
        "version",
        "worker",
        "workflow",
    )

    def __init__(self, row: Any, worker: str) -> None:
        self.run_id: str = row.run_id
        self.workflow: str = row.workflow
        self.version: str = row.version
        self.worker = worker
        self.epoch: int = row.epoch
        self.claims: int = row.claims
        self.span: telemetry.Span | None = None
        self.ctx: Any = None  # the OpenTelemetry context of the run span, for pool threads
        self.claim: list[tuple[str, str]] = []  # a start()ed run's claim, for its next write
        self.done_keys: dict[str, tuple[str, ...]] = {}  # step kind -> its STEPS labels

    def _fields(self, **extra: Any) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "version": self.version,
            "worker": self.worker,
            "epoch": self.epoch,
            **extra,
        }

    def event(self, event: str, level: int = logging.INFO, **extra: Any) -> None:
        """One log line, the run-events counter and (traced) an event on the run span."""
        telemetry.RUN_EVENTS.inc(self.workflow, event)
        telemetry.log_event(log, event, level, **self._fields(**extra))
        if self.span is not None:
            attrs = {f"surefoot.{k}": v for k, v in extra.items() if isinstance(v, str | int)}
            self.span.event(f"surefoot.run.{event}", attrs)

    # -- the execution -----------------------------------------------------------------

    def begin(self, journal: Any, now: float, replayable: int) -> None:
        """The run was claimed: log it and open its span.

        The journal wrote the claim's audit entry in the claim's own transaction:
        ``claimed``, or ``taken_over`` for a run claimed again before its previous execution
        finished or suspended (its worker died or stalled past its lease, or an operator
        resumed it), so the story survives a worker that dies before writing anything.
        A run ``start()`` created running here was never claimed (``claims == 0``; its
        ``created`` entry names this worker): its ``claimed`` entry rides along with the
        execution's next run write, as no claim transaction exists to carry it.
        """
        if _TRACING.tracer is not None:
            from opentelemetry import context as otel_context

            self.span = telemetry.start_span(
                "surefoot.run",
                {
                    "surefoot.run.id": self.run_id,
                    "surefoot.workflow": self.workflow,
                    "surefoot.workflow.version": self.version,
                    "surefoot.worker": self.worker,
                    "surefoot.run.epoch": self.epoch,
                    "surefoot.run.claims": self.claims,
                    "surefoot.run.replayable_steps": replayable,
                },
                telemetry.run_context(self.run_id),
            )
            self.ctx = otel_context.get_current()
        if self.claims > 1:
            self.event("taken_over", logging.WARNING, previous_epoch=self.epoch - 1)
            return
        if self.claims == 0:
            detail = {"worker": self.worker, "epoch": self.epoch, "claims": 1, "claimed_at": now}
            self.claim.append(("claimed", codec.dumps(detail)))
        self.event("claimed", claims=self.claims)
        if replayable:
            self.event("resumed", replayable_steps=replayable)

    def take_claim(self) -> list[tuple[str, str]]:
        """The pending claim entry of a start()ed run (once), for its next run write."""
        out, self.claim = self.claim, []
        return out

    def reached(self, status: str, reason: str | None = None) -> None:
        """The execution ended with the run in ``status`` (its write was accepted)."""
        if status == "needs_attention":
            self.event("needs_attention", logging.WARNING, status=status, reason=reason)
        elif status == "sleeping":
            self.event("waiting", status=status, waiting_for=reason)
        else:
            level = logging.INFO if status == "succeeded" else logging.WARNING
            self.event("finished", level, status=status)
        if self.span is not None:
            self.span.set("surefoot.run.status", status)

    def fenced(self, why: str) -> None:
        """A write of this execution was refused: another worker holds the run now."""
        self.event("fenced", logging.WARNING, why=why)
        if self.span is not None:
            self.span.set("surefoot.run.status", "fenced")

    def end(self, error: BaseException | None = None) -> None:
        """Close the run span (the execution is over, whatever it reached)."""
        if self.span is not None:
            if error is not None and not isinstance(error, GeneratorExit):
                self.span.error(error)
            self.span.close()
            self.span = None

    # -- steps -------------------------------------------------------------------------

    def step_done(self, name: str, kind: str, pos: str, attempts: int) -> None:
        # Every step passes here: the counter's labels are checked once per kind, and the
        # log line is built only if someone listens.
        key = self.done_keys.get(kind)
        if key is None:
            key = self.done_keys[kind] = _STEPS.key(self.workflow, kind, "done")
        _STEPS.inc_key(key)
        if log.isEnabledFor(logging.INFO):
            telemetry.log_event(
                log, "step_done", **self._fields(step=name, pos=pos, attempts=attempts)
            )

    def step_failed(self, name: str, kind: str, pos: str, attempts: int, exc: Exception) -> None:
        telemetry.STEPS.inc(self.workflow, kind, "error")
        telemetry.log_event(
            log,
            "step_failed",
            logging.WARNING,
            **self._fields(step=name, pos=pos, attempts=attempts, error=type(exc).__qualname__),
        )


def enter_run(run: Any) -> Any:
    """Make the run span current in this thread (a pool thread of a sync workflow)."""
    obs = getattr(run, "observer", None)
    if obs is None or obs.ctx is None:
        return None
    from opentelemetry import context as otel_context

    return otel_context.attach(obs.ctx)


def leave_run(token: Any) -> None:
    if token is not None:
        from opentelemetry import context as otel_context

        otel_context.detach(token)


def step_span(run: Any, name: str, kind: str, pos: str) -> telemetry.Span | None:
    """The current span of one step that runs (None when not traced)."""
    return telemetry.start_span(
        "surefoot.step",
        {
            "surefoot.run.id": run.run_id,
            "surefoot.workflow": run.workflow,
            "surefoot.step.name": name,
            "surefoot.step.pos": pos,
            "surefoot.step.kind": kind,
        },
    )


def attempt_span(run: Any, name: str, pos: str, attempt: int) -> telemetry.AttemptSpan | None:
    """The current span of one attempt of a step (None when not traced)."""
    return telemetry.attempt_span(
        name, attempt, {"surefoot.run.id": run.run_id, "surefoot.step.pos": pos}
    )


def decision_reason(retry: bool, attempt: int, max_attempts: int) -> str:
    """The one-line reason of a step's retry decision (the step retry gives no text)."""
    if retry:
        return "retryable: the step's retry policy tries again"
    if attempt >= max_attempts:
        return f"attempts exhausted ({attempt} of {max_attempts})"
    return "not retryable: the step's retry policy gave up"
