"""A queue checker for streams: nothing acknowledged lost, nothing invented, order kept.

Read from the history alone, per stream:

- every message whose append completed ``ok`` was delivered to each consumer group the
  history reads (a ``fetch``) or is among that group's dead letters (``lost`` otherwise); an
  append with an unknown outcome (``info``) may go either way, and one delivered happened;
- every delivered message was appended, with the payload delivered (``invented``), and not
  by appends that all failed (``failed-append-delivered``);
- a message id lives at one sequence number and a sequence number holds one id
  (``duplicate-message``, ``seq-reused``): a retried append must not add a second copy;
- appends are numbered in real-time order (``append-order``); a group receives new messages
  in sequence order (``delivery-order``: a fetch that began after another completed got no
  first delivery below that one's); within one fetch too;
- a message acknowledged is not delivered again to that group by a fetch invoked after the
  acknowledgement completed (``redelivered-after-ack``). Redeliveries before that are
  at-least-once delivery working: they are counted (``redeliveries``), not flagged.

The history should end by draining every group (fetch until empty, then read the dead
letters), or the messages appended after the last fetch count as lost.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ...errors import ConfigError
from ..history import History, Op, Pair
from ._result import Anomaly, CheckResult, as_pairs, ref

__all__ = ["check_queue"]

_FS = ("append", "fetch", "ack", "dead-letters")


def _get(p: Pair, field: str, where: Any = None) -> Any:
    d = where if where is not None else p.value
    if not isinstance(d, dict) or field not in d:
        raise ConfigError(f"{p.describe()}: the value needs {field!r}, got {d!r}")
    return d[field]


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def check_queue(history: History | Iterable[Op]) -> CheckResult:
    """Check ``append``, ``fetch``, ``ack`` and ``dead-letters`` operations of streams.

    Shapes (see ``surefoot.testing.history``): ``append`` ``{"stream", "id", "payload"}``
    completed ``ok`` with ``"seq"`` and ``"duplicate"``; ``fetch`` ``{"stream", "group"}``
    completed ``ok`` with ``"messages": [{"seq", "id", "payload"}]``; ``ack`` ``{"stream",
    "group", "seq"}`` completed ``ok`` with ``"acked"``; ``dead-letters`` ``{"stream",
    "group"}`` completed ``ok`` with ``"messages": [{"seq", "id"}]``.

    Raises:
        ConfigError: a malformed operation.
    """
    by_stream: dict[Any, list[Pair]] = defaultdict(list)
    for p in as_pairs(history):
        if p.f in _FS:
            by_stream[_get(p, "stream", p.invoke.value)].append(p)
    anomalies: list[Anomaly] = []
    stats: dict[str, int] = defaultdict(int)
    for stream, pairs in by_stream.items():
        _Stream(stream, pairs, anomalies, stats).check()
    return CheckResult("queue", tuple(anomalies), dict(stats))


class _Stream:
    def __init__(
        self, stream: Any, pairs: list[Pair], out: list[Anomaly], stats: dict[str, int]
    ) -> None:
        self.stream, self.pairs, self.out, self.stats = stream, pairs, out, stats

    def bad(self, kind: str, text: str, *ps: Pair) -> None:
        self.out.append(
            Anomaly(kind, f"stream {self.stream!r}: {text}", tuple(ref(p) for p in ps), self.stream)
        )

    def check(self) -> None:
        appends = [p for p in self.pairs if p.f == "append"]
        # id -> its appends; the id's outcome is ok if any append of it was ok.
        by_id: dict[Any, list[Pair]] = defaultdict(list)
        for p in appends:
            by_id[_get(p, "id", p.invoke.value)].append(p)
            self.stats[f"appends_{p.type}"] += 1
        seq_of: dict[Any, tuple[int, Pair]] = {}
        id_at: dict[int, tuple[Any, Pair]] = {}

        def place(mid: Any, seq: int, p: Pair) -> None:
            if mid in seq_of and seq_of[mid][0] != seq:
                self.bad(
                    "duplicate-message",
                    f"message {mid!r} is at seq {seq_of[mid][0]} ({seq_of[mid][1].describe()}) "
                    f"and at seq {seq} ({p.describe()})",
                    seq_of[mid][1],
                    p,
                )
            seq_of.setdefault(mid, (seq, p))
            if seq in id_at and id_at[seq][0] != mid:
                self.bad(
                    "seq-reused",
                    f"seq {seq} holds {id_at[seq][0]!r} ({id_at[seq][1].describe()}) and {mid!r} "
                    f"({p.describe()})",
                    id_at[seq][1],
                    p,
                )
            id_at.setdefault(seq, (mid, p))

        for p in appends:
            if p.type == "ok":
                place(_get(p, "id"), _get(p, "seq"), p)
        self.append_order([p for p in appends if p.type == "ok" and not p.value.get("duplicate")])

        fetches = [p for p in self.pairs if p.f == "fetch" and p.type == "ok"]
        groups: dict[Any, list[Pair]] = defaultdict(list)
        for p in fetches:
            groups[_get(p, "group")].append(p)
        dead: dict[Any, dict[Any, Pair]] = defaultdict(dict)
        for p in self.pairs:
            if p.f == "dead-letters" and p.type == "ok":
                group = _get(p, "group")
                groups.setdefault(group, [])
                for m in _get(p, "messages"):
                    dead[group][_get(p, "id", m)] = p
                    place(_get(p, "id", m), _get(p, "seq", m), p)
        acked: dict[tuple[Any, int], Pair] = {}
        for p in self.pairs:
            if p.f == "ack" and p.type == "ok" and p.value.get("acked"):
                acked.setdefault((_get(p, "group"), _get(p, "seq")), p)

        delivered_any: set[Any] = set()
        for group, gf in groups.items():
            delivered = self.deliveries(group, gf, by_id, place, acked)
            delivered_any |= delivered
            for mid, ps in by_id.items():
                if (
                    any(p.type == "ok" for p in ps)
                    and mid not in delivered
                    and mid not in dead[group]
                ):
                    ok = next(p for p in ps if p.type == "ok")
                    self.bad(
                        "lost",
                        f"message {mid!r} was appended ({ok.describe()}) but never delivered to "
                        f"group {group!r} nor dead-lettered",
                        ok,
                    )
                    self.stats["lost"] += 1
            self.stats["dead_letters"] += len(dead[group])
        for mid, ps in by_id.items():
            if not any(p.type == "ok" for p in ps) and any(p.type == "info" for p in ps):
                self.stats["info_delivered" if mid in delivered_any else "info_not_delivered"] += 1

    def append_order(self, oks: list[Pair]) -> None:
        done = sorted(oks, key=lambda p: p.stop)
        best: tuple[int, Pair | None] = (-1, None)
        j = 0
        for p in sorted(oks, key=lambda p: p.start):
            while j < len(done) and done[j].stop < p.start:
                s = _get(done[j], "seq")
                if s > best[0]:
                    best = (s, done[j])
                j += 1
            if best[1] is not None and best[0] > _get(p, "seq"):
                self.bad(
                    "append-order",
                    f"{p.describe()} got seq {_get(p, 'seq')}, but {best[1].describe()} had "
                    f"completed with seq {best[0]} before it began",
                    best[1],
                    p,
                )

    def deliveries(
        self,
        group: Any,
        fetches: list[Pair],
        by_id: dict[Any, list[Pair]],
        place: Any,
        acked: dict[tuple[Any, int], Pair],
    ) -> set[Any]:
        delivered: dict[Any, int] = defaultdict(int)
        first: dict[int, Pair] = {}
        for p in sorted(fetches, key=lambda p: p.stop):
            for m in _get(p, "messages"):
                seq, mid = _get(p, "seq", m), _get(p, "id", m)
                place(mid, seq, p)
                delivered[mid] += 1
                if m.get("attempt", 1) == 1:  # a redelivery's first try may be unseen
                    first.setdefault(seq, p)
                ack = acked.get((group, seq))
                if ack is not None and ack.stop < p.start:
                    self.bad(
                        "redelivered-after-ack",
                        f"{p.describe()} delivered seq {seq} to group {group!r} after "
                        f"{ack.describe()} had acknowledged it",
                        ack,
                        p,
                    )
                ps = by_id.get(mid)
                if not ps:
                    self.bad(
                        "invented",
                        f"{p.describe()} delivered {mid!r} (seq {seq}) to group {group!r}, a "
                        "message never appended",
                        p,
                    )
                elif all(a.type == "fail" for a in ps):
                    self.bad(
                        "failed-append-delivered",
                        f"{p.describe()} delivered {mid!r}, whose appends all failed",
                        ps[0],
                        p,
                    )
                elif "payload" in m and not _same(
                    m["payload"], _get(ps[0], "payload", ps[0].invoke.value)
                ):
                    self.bad(
                        "invented",
                        f"{p.describe()} delivered {mid!r} with payload {m['payload']!r}, not the "
                        f"appended {ps[0].invoke.value['payload']!r}",
                        ps[0],
                        p,
                    )
        self.stats["deliveries"] += sum(delivered.values())
        self.stats["redeliveries"] += sum(n - 1 for n in delivered.values())
        self.delivery_order(group, fetches, first)
        return set(delivered)

    def delivery_order(self, group: Any, fetches: list[Pair], first: dict[int, Pair]) -> None:
        new: dict[int, list[int]] = defaultdict(list)  # id(fetch) -> its first deliveries
        for p in fetches:
            for m in _get(p, "messages"):
                seq = _get(p, "seq", m)
                if first.get(seq) is p:
                    new[id(p)].append(seq)
            mine = new[id(p)]
            if mine != sorted(mine):
                self.bad(
                    "delivery-order",
                    f"{p.describe()} delivered new messages to group {group!r} out of order: seqs "
                    f"{mine}",
                    p,
                )
        done = sorted(fetches, key=lambda p: p.stop)
        best: tuple[int, Pair | None] = (-1, None)
        j = 0
        for p in sorted(fetches, key=lambda p: p.start):
            while j < len(done) and done[j].stop < p.start:
                if new[id(done[j])] and max(new[id(done[j])]) > best[0]:
                    best = (max(new[id(done[j])]), done[j])
                j += 1
            if new[id(p)] and best[1] is not None and min(new[id(p)]) < best[0]:
                self.bad(
                    "delivery-order",
                    f"{p.describe()} first delivered seq {min(new[id(p)])} to group {group!r}, "
                    f"but {best[1].describe()} had already delivered seq {best[0]} before it began",
                    best[1],
                    p,
                )
