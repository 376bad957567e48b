"""Message delivery between agents over a lossy ``Channel``, tick by tick.

Policies (what the sender and receiver do):

* ``at_most_once``: send once, never retry, no acks. Lost messages are missing.
* ``at_least_once``: resend until acked (after ``ack_timeout`` ticks), up to
  ``max_attempts``; the receiver applies every copy it gets, so a lost or late ack repeats
  the effect.
* ``idempotent``: the same sender and the same traffic as ``at_least_once``; the receiver
  remembers message ids and applies each once (it still acks every copy).

A message not acked after ``max_attempts`` goes to the dead-letter list with the whole
message, a reason code and its attempt history; ``redrive`` sends them again.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from surefoot.errors import ConfigError

from .channel import Channel

__all__ = [
    "POLICIES",
    "Channel",
    "DeadLetterMessage",
    "DeliveryReport",
    "averaged",
    "deliver",
    "redrive",
]

POLICIES = ("at_most_once", "at_least_once", "idempotent")


@dataclass(frozen=True, slots=True)
class DeadLetterMessage:
    """A message the sender gave up on.

    Attributes:
        message: the whole message (``{"id": …, "body": …}``).
        reason: ``max_attempts`` (no ack after that many sends).
        attempts: sends made.
        history: one dict per send: the tick, and what happened on the wire (``lost``,
            ``delivered``, ``delivered_ack_lost``, ``delivered_ack_late``), which the sender
            itself could not see.
        effect_applied: the receiver did apply it (only an ack went missing); a redrive to a
            receiver that does not deduplicate would apply it twice.
    """

    message: dict[str, Any]
    reason: str
    attempts: int
    history: list[dict[str, Any]]
    effect_applied: bool


@dataclass(slots=True)
class DeliveryReport:
    """What one ``deliver`` (or ``redrive``) run did.

    Attributes:
        sent: message transmissions (first sends and retries): the traffic.
        acks: ack transmissions by the receiver.
        effects: effects the receiver applied (copies handled).
        repeated: effects applied more than once for the same message.
        missing: messages whose effect was never applied.
        dead_letters: messages the sender gave up on.
        ticks: ticks until the sender had nothing left to do.
    """

    policy: str
    n: int
    seed: int
    sent: int = 0
    acks: int = 0
    effects: int = 0
    repeated: int = 0
    missing: int = 0
    ticks: int = 0
    dead_letters: list[DeadLetterMessage] = field(default_factory=list)
    applied: dict[str, int] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The counts (dead letters counted, not listed)."""
        return {
            "policy": self.policy,
            "n": self.n,
            "seed": self.seed,
            "sent": self.sent,
            "acks": self.acks,
            "effects": self.effects,
            "repeated": self.repeated,
            "missing": self.missing,
            "dead_letters": len(self.dead_letters),
            "ticks": self.ticks,
        }


def _check(policy: str, max_attempts: int, ack_timeout: int) -> None:
    if policy not in POLICIES:
        raise ConfigError(f"unknown delivery policy {policy!r}; use one of {', '.join(POLICIES)}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigError(f"max_attempts must be an integer >= 1, got {max_attempts!r}")
    if isinstance(ack_timeout, bool) or not isinstance(ack_timeout, int) or ack_timeout < 1:
        raise ConfigError(f"ack_timeout must be whole ticks >= 1, got {ack_timeout!r}")


def _simulate(
    policy: str,
    messages: list[dict[str, Any]],
    channel: Channel,
    seed: int,
    max_attempts: int,
    ack_timeout: int,
    applied: dict[str, int],
    report: DeliveryReport,
) -> None:
    """Run the sender, channel and receiver until the sender is done; fill ``report``."""
    rng = channel.rng(seed)
    retries = policy != "at_most_once"
    events: list[tuple[int, int, str, str, int]] = []  # (tick, order, kind, id, attempt)
    order = 0
    attempts: dict[str, int] = {}
    last_sent: dict[str, int] = {}
    acked: set[str] = set()
    dead: set[str] = set()
    history: dict[str, list[dict[str, Any]]] = {}

    def send(mid: str, t: int) -> None:
        nonlocal order
        attempts[mid] = attempts.get(mid, 0) + 1
        last_sent[mid] = t
        report.sent += 1
        arrivals = channel.transmit(rng)
        history.setdefault(mid, []).append(
            {"attempt": attempts[mid], "tick": t, "wire": "delivered" if arrivals else "lost"}
        )
        for d in arrivals:
            order += 1
            heapq.heappush(events, (t + d, order, "msg", mid, attempts[mid]))

    for m in messages:
        send(m["id"], 0)
    t = 0
    while True:
        while events and events[0][0] <= t:
            _, _, kind, mid, attempt = heapq.heappop(events)
            if kind == "msg":
                seen = applied.get(mid, 0)
                if policy != "idempotent" or seen == 0:
                    applied[mid] = seen + 1
                    report.effects += 1
                if retries:  # ack every copy (also duplicates: the sender may be waiting)
                    report.acks += 1
                    arrivals = channel.transmit(rng)
                    h = history[mid][attempt - 1]
                    if not arrivals:
                        h["wire"] = "delivered_ack_lost"
                    for d in arrivals[:1]:
                        order += 1
                        heapq.heappush(events, (t + d, order, "ack", mid, attempt))
            else:
                if mid not in acked and mid not in dead:
                    acked.add(mid)
                elif mid in dead:
                    history[mid][attempt - 1]["wire"] = "delivered_ack_late"
        pending = False
        if retries:
            for m in messages:
                mid = m["id"]
                if mid in acked or mid in dead:
                    continue
                pending = True
                if t - last_sent[mid] >= ack_timeout:
                    if attempts[mid] < max_attempts:
                        send(mid, t)
                    else:
                        dead.add(mid)
                        report.dead_letters.append(
                            DeadLetterMessage(
                                dict(m), "max_attempts", attempts[mid], history[mid], False
                            )
                        )
        if not events and not pending:
            break
        t += 1
    report.ticks = t
    # effect_applied is known only now (a late copy may have arrived after the give-up).
    report.dead_letters = [
        DeadLetterMessage(d.message, d.reason, d.attempts, d.history, d.message["id"] in applied)
        for d in report.dead_letters
    ]


def _finish(report: DeliveryReport, ids: list[str]) -> DeliveryReport:
    report.repeated = sum(max(0, report.applied.get(i, 0) - 1) for i in ids)
    report.missing = sum(1 for i in ids if report.applied.get(i, 0) == 0)
    return report


def deliver(
    policy: str,
    n: int = 100,
    channel: Channel | None = None,
    seed: int = 0,
    *,
    max_attempts: int = 5,
    ack_timeout: int = 3,
) -> DeliveryReport:
    """Send ``n`` messages from one agent to another over ``channel``.

    Args:
        policy: ``at_most_once``, ``at_least_once`` or ``idempotent``.
        n: messages to send.
        channel: the link (``Channel()``: 20% loss, no duplication, up to 1 tick of delay).
        seed: with the channel's seed, fixes the fate of every transmission.
        max_attempts: sends per message before it becomes a dead letter.
        ack_timeout: ticks the sender waits for an ack before resending.

    Returns:
        A ``DeliveryReport``.
    """
    _check(policy, max_attempts, ack_timeout)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"n must be a count of messages >= 0, got {n!r}")
    channel = channel if channel is not None else Channel()
    msgs = [{"id": f"m{i}", "body": f"finding {i}"} for i in range(n)]
    report = DeliveryReport(policy, n, seed)
    _simulate(policy, msgs, channel, seed, max_attempts, ack_timeout, report.applied, report)
    return _finish(report, [m["id"] for m in msgs])


def redrive(
    report: DeliveryReport,
    channel: Channel | None = None,
    seed: int = 1,
    *,
    max_attempts: int = 5,
    ack_timeout: int = 3,
) -> DeliveryReport:
    """Send a report's dead letters again, to the same receiver (it keeps what it applied).

    With an ``idempotent`` receiver a redrive cannot repeat an effect, even for dead letters
    whose effect was applied and only the ack was lost; with ``at_least_once`` it can.

    Returns:
        A new ``DeliveryReport`` over all ``report.n`` messages: its traffic counts are the
        redrive's own, its ``effects``/``repeated``/``missing`` are the totals after it.
    """
    _check(report.policy, max_attempts, ack_timeout)
    channel = channel if channel is not None else Channel()
    msgs = [d.message for d in report.dead_letters]
    out = DeliveryReport(report.policy, report.n, seed, applied=dict(report.applied))
    out.effects = report.effects
    if msgs:
        _simulate(report.policy, msgs, channel, seed, max_attempts, ack_timeout, out.applied, out)
    return _finish(out, [f"m{i}" for i in range(report.n)])


_MEAN = ("sent", "acks", "effects", "repeated", "missing", "dead_letters", "ticks")


def averaged(
    policy: str,
    n: int = 100,
    channel: Channel | None = None,
    seeds: Iterable[int] = range(20),
    **kwargs: Any,
) -> dict[str, float]:
    """``deliver`` over several seeds; the mean of each count."""
    seed_list = list(seeds)
    if not seed_list:
        raise ConfigError("seeds must name at least one seed, got an empty list")
    rows = [deliver(policy, n, channel, s, **kwargs).as_dict() for s in seed_list]
    out = {k: sum(r[k] for r in rows) / len(rows) for k in _MEAN}
    out["n"] = float(n)
    out["seeds"] = float(len(seed_list))
    return out
