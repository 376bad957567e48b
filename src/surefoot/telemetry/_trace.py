"""Traces through OpenTelemetry: off (and free) until ``instrument()`` turns them on.

OpenTelemetry is an extra (``surefoot[otel]``), imported only by ``instrument``. Until then
``TRACING.tracer`` is None and every instrumented place costs one attribute read.

Spans surefoot makes (attributes a user filters on in brackets):

- ``surefoot.run`` per execution of a durable run (``surefoot.run.id``,
  ``surefoot.workflow``, ``surefoot.workflow.version``, ``surefoot.worker``,
  ``surefoot.run.epoch``, ``surefoot.run.claims``, ``surefoot.run.status`` at the end).
  Every execution of a run, before and after a suspend or a takeover by another worker,
  belongs to one trace whose id is derived from the run id (``trace_id_of``), so nothing
  needs storing to carry the trace across a suspend, a resume or a crash.
- ``surefoot.step`` per step that runs (``surefoot.step.name``, ``surefoot.step.pos``,
  ``surefoot.step.kind``, ``surefoot.step.attempts``).
- ``surefoot.attempt`` per attempt, of a step or of ``retry_call`` (``surefoot.attempt``,
  ``surefoot.function``); a failed attempt carries the exception and a
  ``surefoot.retry.decision`` event (``surefoot.retry.retry``, ``surefoot.retry.wait``,
  ``surefoot.retry.reason``, ``surefoot.retry.reason_code``, ``error.type``).
- ``surefoot.breaker.state_change`` events on the span current when a breaker moves
  (``surefoot.breaker.name``, ``surefoot.breaker.from``, ``surefoot.breaker.to``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ..errors import MissingExtraError
from ..version import __version__

__all__ = [
    "TRACING",
    "AttemptSpan",
    "Span",
    "add_event",
    "attempt_span",
    "instrument",
    "reason_code",
    "run_context",
    "start_span",
    "trace_id_of",
    "uninstrument",
]

Attrs = Mapping[str, str | bool | int | float]


class _Tracing:
    """The switch: ``tracer`` is an OpenTelemetry tracer while instrumented, else None."""

    __slots__ = ("tracer",)

    def __init__(self) -> None:
        self.tracer: Any = None


TRACING = _Tracing()


def instrument(tracer_provider: Any = None) -> None:
    """Turn on surefoot's spans, made by ``tracer_provider`` (default: the global one).

    Raises:
        MissingExtraError: OpenTelemetry is not installed (``pip install surefoot[otel]``).
    """
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise MissingExtraError("otel", "OpenTelemetry traces") from exc
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    TRACING.tracer = provider.get_tracer("surefoot", __version__)


def uninstrument() -> None:
    """Stop making spans (what is open ends as usual)."""
    TRACING.tracer = None


def trace_id_of(run_id: str) -> int:
    """The trace id (128 bits, never 0) every execution of run ``run_id`` is recorded under."""
    n = int.from_bytes(hashlib.sha256(b"surefoot-run:" + run_id.encode()).digest()[:16], "big")
    return n or 1


def _root_span_id(run_id: str) -> int:
    n = int.from_bytes(hashlib.sha256(b"surefoot-root:" + run_id.encode()).digest()[:8], "big")
    return n or 1


def run_context(run_id: str) -> Any:
    """An OpenTelemetry context whose (remote) parent is the run's root, in the run's trace."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    parent = SpanContext(
        trace_id_of(run_id),
        _root_span_id(run_id),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


def reason_code(retry: bool, reason: str) -> str:
    """A short code for a retry decision's reason, fit for a metric label or a filter."""
    if retry:
        return "retryable"
    if reason.startswith("not retryable"):
        return "not_retryable"
    if reason.startswith("attempts exhausted"):
        return "attempts_exhausted"
    if "retry budget" in reason:
        return "budget_empty"
    if "max_retry_after" in reason:
        return "retry_after_too_long"
    if "deadline" in reason:
        return "deadline"
    return "gave_up"


def add_event(name: str, attributes: Attrs) -> None:
    """Add an event to the current span (nothing when not instrumented or no span)."""
    if TRACING.tracer is None:
        return
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(name, dict(attributes))


class Span:
    """A started span, current until ``close``; a thin, typed handle over OpenTelemetry's."""

    __slots__ = ("_span", "_token")

    def __init__(self, name: str, attributes: Attrs, context: Any = None) -> None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        tracer = TRACING.tracer
        self._span = tracer.start_span(name, context=context, attributes=dict(attributes))
        self._token = otel_context.attach(trace.set_span_in_context(self._span))

    def set(self, key: str, value: str | bool | int | float) -> None:
        self._span.set_attribute(key, value)

    def event(self, name: str, attributes: Attrs) -> None:
        self._span.add_event(name, dict(attributes))

    def error(self, exc: BaseException) -> None:
        """Mark the span failed by ``exc`` (recorded as an exception event)."""
        from opentelemetry.trace import Status, StatusCode

        self._span.record_exception(exc)
        self._span.set_attribute("error.type", type(exc).__qualname__)
        self._span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200]))

    def close(self) -> None:
        from opentelemetry import context as otel_context

        try:
            otel_context.detach(self._token)
        except Exception:  # detached in another context (a generator moved threads): harmless
            pass
        self._span.end()


def start_span(name: str, attributes: Attrs, context: Any = None) -> Span | None:
    """A ``Span`` made current, or None when not instrumented."""
    if TRACING.tracer is None:
        return None
    return Span(name, attributes, context)


class AttemptSpan(Span):
    """The span of one attempt; ``decided`` adds the retry decision event to it."""

    __slots__ = ()

    def decided(self, exc: BaseException, retry: bool, wait: float | None, reason: str) -> None:
        self.error(exc)
        self.event(
            "surefoot.retry.decision",
            {
                "surefoot.retry.retry": retry,
                "surefoot.retry.wait": float(wait or 0.0),
                "surefoot.retry.reason": reason,
                "surefoot.retry.reason_code": reason_code(retry, reason),
                "error.type": type(exc).__qualname__,
            },
        )


def attempt_span(function: str, attempt: int, extra: Attrs | None = None) -> AttemptSpan | None:
    """The current span of attempt ``attempt`` of ``function``, or None when not instrumented."""
    if TRACING.tracer is None:
        return None
    attrs: dict[str, Any] = {"surefoot.attempt": attempt, "surefoot.function": function}
    if extra:
        attrs.update(extra)
    return AttemptSpan("surefoot.attempt", attrs)
