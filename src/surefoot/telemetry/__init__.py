"""Logs, traces and metrics: see inside runs, retries and breakers.

- **Logs**: the ``surefoot.*`` loggers (``surefoot.durable.worker``: one line per run
  event; ``surefoot.resilience.breaker``: state changes), secrets masked at the source;
  ``configure_logging(format="json")`` writes JSON lines.
- **Traces**: ``instrument(tracer_provider)`` turns on OpenTelemetry spans per run, step
  and attempt, with retry decisions and breaker changes as events (extra ``otel``).
- **Metrics**: ``prometheus_text(journal=…, streams=…, consumers=…)`` for a ``/metrics``
  endpoint, or ``bind_otel(meter_provider, …)``; ``collect(…)`` returns the numbers as
  ``Family`` values.
"""

from __future__ import annotations

from ._log import (
    LOG_FORMATS,
    JsonFormatter,
    RedactingFilter,
    configure_logging,
    get_logger,
    log_event,
    redact,
    redact_value,
)
from ._metrics import (
    BREAKER_TRANSITIONS,
    REGISTRY,
    RETRY_DECISIONS,
    RUN_EVENTS,
    RUN_STATES,
    STEPS,
    Counter,
    Family,
    Registry,
    bind_otel,
    collect,
    prometheus_text,
    track_breaker,
)
from ._notes import ATTEMPT_NOTES, AttemptNotes, attempt_outcome, note_attempt
from ._trace import (
    TRACING,
    AttemptSpan,
    Span,
    add_event,
    attempt_span,
    instrument,
    reason_code,
    run_context,
    start_span,
    trace_id_of,
    uninstrument,
)

__all__ = [
    "ATTEMPT_NOTES",
    "BREAKER_TRANSITIONS",
    "LOG_FORMATS",
    "REGISTRY",
    "RETRY_DECISIONS",
    "RUN_EVENTS",
    "RUN_STATES",
    "STEPS",
    "TRACING",
    "AttemptNotes",
    "AttemptSpan",
    "Counter",
    "Family",
    "JsonFormatter",
    "RedactingFilter",
    "Registry",
    "Span",
    "add_event",
    "attempt_outcome",
    "attempt_span",
    "bind_otel",
    "collect",
    "configure_logging",
    "get_logger",
    "instrument",
    "log_event",
    "note_attempt",
    "prometheus_text",
    "reason_code",
    "redact",
    "redact_value",
    "run_context",
    "start_span",
    "trace_id_of",
    "track_breaker",
    "uninstrument",
]
