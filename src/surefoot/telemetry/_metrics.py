"""Metrics: counters kept in-process, gauges read from a journal and from streams.

Two ways out, from the same numbers:

- ``prometheus_text(...)``: the Prometheus text exposition format (version 0.0.4), for a
  ``/metrics`` endpoint (the ``surefoot ui`` server can serve it; so can any WSGI/ASGI app).
- ``bind_otel(...)``: OpenTelemetry observable instruments on a ``MeterProvider``, read
  whenever its readers collect (the ``otel`` extra).

Counters (this process): retry decisions by decision, reason code and error type; breaker
transitions; durable steps by workflow, kind and outcome; run events by workflow and event.
Gauges (read at collection): the state of every live ``CircuitBreaker``; runs by state, the
queue depth (runs claimable now) and the age of the oldest of them, from a journal; kept
messages per stream, and pending messages, dead letters and lag per stream consumer group,
from one ``Stream.stats()`` per stream (no message is read).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..storage.runs import RunStatus
from ..version import __version__

__all__ = [
    "BREAKERS",
    "BREAKER_TRANSITIONS",
    "REGISTRY",
    "RETRY_DECISIONS",
    "RUN_EVENTS",
    "RUN_STATES",
    "STEPS",
    "Counter",
    "Family",
    "Registry",
    "bind_otel",
    "collect",
    "prometheus_text",
    "track_breaker",
]

RUN_STATES = tuple(s.value for s in RunStatus)
"""The run statuses a journal holds (:class:`~surefoot.storage.runs.RunStatus`)."""

_BREAKER_VALUE = {"closed": 0, "half_open": 1, "open": 2}


@dataclass(frozen=True, slots=True)
class Family:
    """One metric and its samples.

    Attributes:
        name: the Prometheus name (``surefoot_retry_decisions_total``).
        kind: ``counter`` or ``gauge``.
        help: one line. otel_name / unit: the OpenTelemetry instrument's name and unit.
        samples: ``(labels, value)`` pairs; labels are sorted ``(name, value)`` tuples.
    """

    name: str
    kind: str
    help: str
    otel_name: str
    unit: str = ""
    samples: tuple[tuple[tuple[tuple[str, str], ...], float], ...] = ()

    def value(self, **labels: str) -> float:
        """The sample with exactly these labels (0 when there is none)."""
        want = tuple(sorted(labels.items()))
        return next((v for ls, v in self.samples if ls == want), 0.0)

    def total(self, **labels: str) -> float:
        """The sum of the samples whose labels include these."""
        want = set(labels.items())
        return sum(v for ls, v in self.samples if want <= set(ls))


@dataclass
class Counter:
    """A monotonic counter with labels; ``inc`` is thread-safe."""

    name: str
    help: str
    labels: tuple[str, ...]
    otel_name: str
    unit: str = ""
    _values: dict[tuple[str, ...], float] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inc(self, *values: str, by: float = 1.0) -> None:
        if len(values) != len(self.labels):
            raise ValueError(f"{self.name} takes labels {self.labels}, got {values!r}")
        with self._lock:
            self._values[values] = self._values.get(values, 0.0) + by

    def inc_key(self, key: tuple[str, ...]) -> None:
        """``inc(*key)`` for a hot path that checked ``key``'s arity once (see ``key``)."""
        with self._lock:
            values = self._values
            values[key] = values.get(key, 0.0) + 1.0

    def key(self, *values: str) -> tuple[str, ...]:
        """The label values as ``inc_key`` takes them, checked once."""
        if len(values) != len(self.labels):
            raise ValueError(f"{self.name} takes labels {self.labels}, got {values!r}")
        return values

    def family(self) -> Family:
        with self._lock:
            items = list(self._values.items())
        return Family(
            self.name,
            "counter",
            self.help,
            self.otel_name,
            self.unit,
            tuple((tuple(sorted(zip(self.labels, k, strict=True))), v) for k, v in items),
        )

    def reset(self) -> None:
        """Forget every count (for tests)."""
        with self._lock:
            self._values.clear()


class Registry:
    """The process's counters, in the order they were made."""

    def __init__(self) -> None:
        self.counters: list[Counter] = []

    def counter(self, name: str, help: str, labels: Sequence[str], otel_name: str) -> Counter:
        c = Counter(name, help, tuple(labels), otel_name)
        self.counters.append(c)
        return c

    def families(self) -> list[Family]:
        return [c.family() for c in self.counters]

    def reset(self) -> None:
        """Forget every count (for tests)."""
        for c in self.counters:
            c.reset()


REGISTRY = Registry()
RETRY_DECISIONS = REGISTRY.counter(
    "surefoot_retry_decisions_total",
    "Decisions after a failed attempt: retried or gave up, by reason code and error type.",
    ("decision", "reason", "error_type"),
    "surefoot.retry.decisions",
)
BREAKER_TRANSITIONS = REGISTRY.counter(
    "surefoot_breaker_transitions_total",
    "Circuit breaker state changes, by breaker and the state entered.",
    ("breaker", "to"),
    "surefoot.breaker.transitions",
)
STEPS = REGISTRY.counter(
    "surefoot_steps_total",
    "Durable steps executed here, by workflow, kind and outcome (done, error).",
    ("workflow", "kind", "outcome"),
    "surefoot.steps",
)
RUN_EVENTS = REGISTRY.counter(
    "surefoot_run_events_total",
    "Run events seen by this process's workers (claimed, finished, taken_over, fenced …).",
    ("workflow", "event"),
    "surefoot.run.events",
)

BREAKERS: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every live ``CircuitBreaker`` (weakly held: a breaker no one uses is not kept alive)."""


def track_breaker(breaker: Any) -> None:
    """Report ``breaker``'s state in the ``surefoot_breaker_state`` gauge while it lives."""
    BREAKERS.add(breaker)


def _breaker_family() -> Family:
    worst: dict[str, int] = {}
    for b in list(BREAKERS):
        v = _BREAKER_VALUE.get(b.state, 0)
        worst[b.name] = max(worst.get(b.name, 0), v)
    return Family(
        "surefoot_breaker_state",
        "gauge",
        "Circuit breaker state: 0 closed, 1 half_open, 2 open (the worst of breakers sharing "
        "a name).",
        "surefoot.breaker.state",
        "",
        tuple(((("breaker", n),), float(v)) for n, v in sorted(worst.items())),
    )


def _journal_families(journal: Any, now: float) -> list[Family]:
    # aggregates only (counts per state, the backlog's size and oldest): a scrape costs
    # two indexed queries whatever the journal's size, and reads no run row
    by_state = dict.fromkeys(RUN_STATES, 0)
    for s, n in journal.count_runs().items():
        by_state[s] = by_state.get(s, 0) + int(n)
    depth, since = journal.backlog(now=now)
    oldest = max(0.0, now - since) if since is not None else 0.0
    return [
        Family(
            "surefoot_runs",
            "gauge",
            "Runs in the journal, by state.",
            "surefoot.runs",
            "{run}",
            tuple(((("state", s),), float(n)) for s, n in by_state.items()),
        ),
        Family(
            "surefoot_queue_depth",
            "gauge",
            "Runs a worker could claim now: pending, sleeping and due, or running with an "
            "expired lease.",
            "surefoot.queue.depth",
            "{run}",
            (((), float(depth)),),
        ),
        Family(
            "surefoot_queue_oldest_age_seconds",
            "gauge",
            "Seconds the longest-waiting claimable run has been claimable (0: none).",
            "surefoot.queue.oldest_age",
            "s",
            (((), oldest),),
        ),
    ]


def _read_stats(streams: Iterable[Any], consumers: Iterable[Any]) -> list[Any]:
    """``StreamStats`` of ``streams`` (a ``Stream`` is read with one ``stats()`` call; a
    ``StreamStats`` is taken as it is), then of the ``consumers``' streams not already
    read, narrowed to the groups passed: one ``stats()`` per stream in all."""
    from dataclasses import replace

    from ..storage.streams import ConsumerStats

    out: list[Any] = []
    seen: set[str] = set()
    for s in streams:  # a stream passed twice is read and emitted once (one series per name)
        if str(s.name) in seen:
            continue
        out.append(s.stats() if callable(getattr(s, "stats", None)) else s)
        seen.add(str(s.name))
    by_stream: dict[int, tuple[Any, list[str]]] = {}
    for c in consumers:
        names = by_stream.setdefault(id(c.stream), (c.stream, []))[1]
        if str(c.name) not in names:
            names.append(str(c.name))
    for stream, names in by_stream.values():
        if str(stream.name) in seen:
            continue
        st = stream.stats()
        have = {g.name: g for g in st.consumers}
        # a group passed that holds no row yet: nothing pending or dead, all still to hand out
        groups = tuple(have.get(n) or ConsumerStats(n, 0, 0, 0, st.last_seq) for n in names)
        out.append(replace(st, consumers=groups))
        seen.add(str(st.name))
    return out


def _stream_families(stats: list[Any]) -> list[Family]:
    messages, dead, pending, lag = [], [], [], []
    for st in stats:
        messages.append(((("stream", str(st.name)),), float(st.messages)))
        for c in st.consumers:
            labels = (("consumer", str(c.name)), ("stream", str(st.name)))
            dead.append((labels, float(c.dead)))
            pending.append((labels, float(c.pending)))
            lag.append((labels, float(c.lag)))
    return [
        Family(
            "surefoot_stream_messages",
            "gauge",
            "Messages a stream keeps (retention trims the rest).",
            "surefoot.stream.messages",
            "{message}",
            tuple(messages),
        ),
        Family(
            "surefoot_dead_letters",
            "gauge",
            "Dead letters waiting, per stream and consumer group.",
            "surefoot.stream.dead_letters",
            "{message}",
            tuple(dead),
        ),
        Family(
            "surefoot_stream_pending",
            "gauge",
            "Messages delivered and not yet acked, per stream and consumer group.",
            "surefoot.stream.pending",
            "{message}",
            tuple(pending),
        ),
        Family(
            "surefoot_stream_lag",
            "gauge",
            "Messages appended and not yet handed to the consumer group (last seq - position).",
            "surefoot.stream.lag",
            "{message}",
            tuple(lag),
        ),
    ]


def collect(
    *,
    journal: Any = None,
    streams: Iterable[Any] = (),
    consumers: Iterable[Any] = (),
    now: float | None = None,
) -> list[Family]:
    """Every metric now: this process's counters and breakers, plus the journal's and the
    streams' gauges when given.

    Args:
        journal: a ``surefoot.storage`` journal (``App.journal``) to count runs in.
        streams: ``surefoot.statebus.Stream`` objects (each read with one ``stats()`` call:
            every consumer group's pending, dead letters and lag), or ``StreamStats``
            already read; see ``statebus.streams(url)`` for the names in a storage.
        consumers: ``surefoot.statebus.Consumer`` objects: the groups of their streams to
            count, for a stream not passed in ``streams`` (one ``stats()`` per stream).
        now: the journal's time (``Clock.now()``, default ``time.time()``) for the ages.
    """
    out = [*REGISTRY.families(), _breaker_family()]
    if journal is not None:
        out += _journal_families(journal, time.time() if now is None else now)
    streams, consumers = list(streams), list(consumers)
    if streams or consumers:
        out += _stream_families(_read_stats(streams, consumers))
    return out


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if v == int(v) and abs(v) < 2**53 else repr(v)


def prometheus_text(
    *,
    journal: Any = None,
    streams: Iterable[Any] = (),
    consumers: Iterable[Any] = (),
    now: float | None = None,
) -> str:
    """``collect(...)`` in the Prometheus text format (``text/plain; version=0.0.4``)."""
    lines: list[str] = []
    for f in collect(journal=journal, streams=streams, consumers=consumers, now=now):
        lines.append(f"# HELP {f.name} {f.help}")
        lines.append(f"# TYPE {f.name} {f.kind}")
        for labels, v in f.samples:
            ls = ",".join(f'{k}="{_escape(x)}"' for k, x in labels)
            lines.append(f"{f.name}{{{ls}}} {_number(v)}" if ls else f"{f.name} {_number(v)}")
    return "\n".join(lines) + "\n"


def bind_otel(
    meter_provider: Any = None,
    *,
    journal: Any = None,
    streams: Iterable[Any] = (),
    consumers: Iterable[Any] = (),
    clock: Callable[[], float] | None = None,
) -> list[Any]:
    """Register surefoot's metrics as observable instruments on an OpenTelemetry meter.

    Each instrument reads ``collect`` when the provider's readers collect. Counters become
    observable counters, gauges observable gauges.

    Args:
        meter_provider: where to register (default: the global ``MeterProvider``).
        journal / streams / consumers: as for ``collect`` (streams are read at each
            collection, one ``stats()`` each for the four stream instruments).
        clock: the journal's ``now`` (default ``time.time``).

    Returns:
        The instruments made.

    Raises:
        MissingExtraError: OpenTelemetry is not installed (``pip install surefoot[otel]``).
    """
    try:
        from opentelemetry import metrics
    except ImportError as exc:
        from ..errors import MissingExtraError

        raise MissingExtraError("otel", "OpenTelemetry metrics") from exc
    from opentelemetry.metrics import CallbackOptions, Observation

    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    meter = provider.get_meter("surefoot", __version__)
    streams, consumers = list(streams), list(consumers)
    now = clock or time.time

    journal_names = {"surefoot_runs", "surefoot_queue_depth", "surefoot_queue_oldest_age_seconds"}
    memo: list[tuple[float, list[Family]]] = []
    stream_memo: list[tuple[float, list[Family]]] = []

    def journal_fams() -> list[Family]:
        # one query serves the three journal instruments of one collection
        t = time.monotonic()
        if not memo or t - memo[0][0] > 1.0:
            memo[:] = [(t, _journal_families(journal, now()))]
        return memo[0][1]

    def stream_fams() -> list[Family]:
        # one stats() per stream serves the four stream instruments of one collection
        t = time.monotonic()
        if not stream_memo or t - stream_memo[0][0] > 1.0:
            stream_memo[:] = [(t, _stream_families(_read_stats(streams, consumers)))]
        return stream_memo[0][1]

    def families_of(name: str) -> list[Family]:
        for c in REGISTRY.counters:
            if c.name == name:
                return [c.family()]
        if name == "surefoot_breaker_state":
            return [_breaker_family()]
        if name in journal_names:
            return journal_fams()
        return stream_fams()

    def reader(name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for f in families_of(name):
                if f.name == name:
                    return [Observation(v, dict(ls)) for ls, v in f.samples]
            return []

        return observe

    made = []
    for f in collect(journal=journal, streams=streams, consumers=consumers, now=now()):
        if f.kind == "counter":
            make = meter.create_observable_counter
        else:
            make = meter.create_observable_gauge
        made.append(make(f.otel_name, callbacks=[reader(f.name)], unit=f.unit, description=f.help))
    return made
