"""Linearizability of a versioned register: reads, blind writes and compare-and-set.

The method of Gibbons & Korach ("Testing Shared Memories", SIAM J. Comput. 1997) for
histories where every version is unique and says which version it replaced, as
rystsov/fast-jepsen applies it to compare-and-set stores: chain the writes by the version
each replaced, map each read to the write of the version it saw, and check the chain
against real-time order. surefoot's versions are a key's write count (1, 2, 3 …), so a write
that made version ``v`` replaced ``v - 1`` and the chain is the version numbers themselves.

Per key, in O(n log n):

1. Each ``ok`` write made exactly one version, no two the same (``duplicate-version``), and a
   compare-and-set expecting ``e`` made ``e + 1`` (``cas-wrong-version``).
2. Each read of version ``v`` returned what the write of ``v`` wrote (``wrong-value``); a
   value no write wrote is a ``garbage-read``, one a failed write wrote an ``aborted-read``.
   A value written by an unknown-outcome (``info``) write places that write at ``v``: it
   happened (once: at two versions it is ``applied-twice``).
3. Place every operation that observed a version: a write of ``v`` at ``2v``, a read of
   ``v`` (or a refused compare-and-set that found ``v``) at ``2v + 1``. Linearizable iff,
   whenever A completed before B was invoked, A's place is at most B's: a later read saw an
   older version (``stale-read``) or a later write made an older one (``real-time``)
   otherwise. One sweep over completions sorted by time answers this for every B.
4. Every version up to the highest observed was made by some write: the ones no ``ok``
   write made are filled greedily, lowest first, by ``info`` writes that could have made
   them (invoked before anything observed that version or a later one completed, and not
   placed before an operation that completed before they began); a version none could
   make is a ``phantom-version``.

Then sorting by place (reads of one version by invocation) is a linearization. Written
values must be unique per key (the workload's job: ``f"{process}-{n}"``); deletes are not
modelled.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ..history import History, Op, Pair
from ._result import Anomaly, CheckResult, as_pairs, ref

__all__ = ["check_register"]

INF = float("inf")


@dataclass(slots=True)
class _Obs:
    """An operation that observed (or made) a version, at place ``pos``."""

    pair: Pair
    pos: int
    start: int
    stop: float


def _ident(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _version(p: Pair, field: str) -> int | None:
    v = p.end.value.get(field) if p.end is not None and isinstance(p.end.value, dict) else None
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ConfigError(f"{p.describe()}: {field} must be a whole number >= 0, got {v!r}")
    return v


def _key_of(p: Pair) -> Any:
    v = p.invoke.value
    if not isinstance(v, dict) or "key" not in v:
        raise ConfigError(f"{p.describe()}: a register operation's value needs a 'key', got {v!r}")
    return v["key"]


def check_register(history: History | Iterable[Op]) -> CheckResult:
    """Check every key's ``read`` / ``write`` operations for linearizability.

    Shapes: ``read`` ``{"key"}`` completed ``ok`` ``{"key", "version", "value"}`` (version
    0: absent); ``write`` ``{"key", "value", "expect"}`` (``expect`` None for a blind write)
    completed ``ok`` with ``"version"`` (the one it made), ``fail`` (nothing written; with
    ``"current"``, the version found, it counts as a read) or ``info``. Other ``f`` are
    ignored.

    Raises:
        ConfigError: a malformed operation, or two writes of one key with one value.
    """
    by_key: dict[Any, list[Pair]] = defaultdict(list)
    for p in as_pairs(history):
        if p.f in ("read", "write"):
            by_key[_key_of(p)].append(p)
    anomalies: list[Anomaly] = []
    stats = {
        "keys": len(by_key),
        "ops": 0,
        "unknown_writes": 0,
        "unknown_seen": 0,
        "unknown_needed": 0,
    }
    for key, pairs in by_key.items():
        _check_key(key, pairs, anomalies, stats)
    return CheckResult("register", tuple(anomalies), stats)


def _check_key(key: Any, pairs: list[Pair], out: list[Anomaly], stats: dict[str, int]) -> None:
    stats["ops"] += len(pairs)
    writes = [p for p in pairs if p.f == "write"]
    by_value: dict[str, Pair] = {}
    for w in writes:
        ident = _ident(w.invoke.value.get("value"))
        if ident in by_value:
            raise ConfigError(
                f"key {key!r}: {w.describe()} writes the same value as "
                f"{by_value[ident].describe()}; the register checker needs unique values per key"
            )
        by_value[ident] = w

    def bad(kind: str, text: str, *ps: Pair) -> None:
        out.append(Anomaly(kind, f"key {key!r}: {text}", tuple(ref(p) for p in ps), key))

    made: dict[int, Pair] = {}  # version -> the write that made it
    placed: dict[int, int] = {}  # id(info write) -> version
    obs: list[_Obs] = []
    for w in writes:
        if w.type != "ok":
            continue
        v = _version(w, "version")
        if v is None or v < 1:
            raise ConfigError(f"key {key!r}: {w.describe()} needs the version it made (>= 1)")
        expect = w.invoke.value.get("expect")
        if expect is not None and v != expect + 1:
            bad("cas-wrong-version", f"{w.describe()} expected version {expect} yet made {v}", w)
        if v in made:
            bad(
                "duplicate-version",
                f"{made[v].describe()} and {w.describe()} both made version {v}",
                made[v],
                w,
            )
        else:
            made[v] = w
        obs.append(_Obs(w, 2 * v, w.start, w.stop))

    for p in pairs:
        if p.f == "read" and p.type == "ok":
            v = _version(p, "version")
            if v is None:
                raise ConfigError(f"key {key!r}: {p.describe()} needs the version it read")
            obs.append(_Obs(p, 2 * v + 1, p.start, p.stop))
            _map_read(p, v, made, placed, by_value, bad)
        elif p.f == "write" and p.type == "fail":
            cur = _version(p, "current")
            if cur is None:
                continue
            expect = p.invoke.value.get("expect")
            if expect is not None and cur == expect:
                bad(
                    "cas-refused",
                    f"{p.describe()} was refused expecting {expect}, yet found {cur}",
                    p,
                )
            obs.append(_Obs(p, 2 * cur + 1, p.start, p.stop))

    unknown = [w for w in writes if w.type == "info"]
    stats["unknown_writes"] += len(unknown)
    stats["unknown_seen"] += len(placed)
    for w in unknown:
        if id(w) in placed:
            obs.append(_Obs(w, 2 * placed[id(w)], w.start, INF))

    before = _Before([o for o in obs if o.stop != INF])
    for o in obs:
        m, a = before.at(o.start)
        if a is not None and m > o.pos:
            _late(o, a, bad)

    limit = len([w for w in writes if w.type in ("ok", "info")])
    highest = 0
    for o in obs:
        v = o.pos // 2
        if v > limit:
            bad(
                "phantom-version",
                f"{o.pair.describe()} saw version {v}, more than the {limit} writes "
                "that could have made one",
                o.pair,
            )
        else:
            highest = max(highest, v)
    free = [w for w in unknown if id(w) not in placed]
    stats["unknown_needed"] += _fill_gaps(highest, made, obs, free, before, bad)


def _map_read(
    p: Pair,
    v: int,
    made: dict[int, Pair],
    placed: dict[int, int],
    by_value: dict[str, Pair],
    bad: Any,
) -> None:
    value = p.end.value.get("value") if p.end is not None else None
    if v == 0:
        if value is not None:
            bad("wrong-value", f"{p.describe()} read version 0 (absent) with value {value!r}", p)
        return
    ident = _ident(value)
    w = made.get(v)
    if w is not None:
        if _ident(w.invoke.value.get("value")) != ident:
            bad(
                "wrong-value",
                f"{p.describe()} read version {v} = {value!r}, but {w.describe()} wrote "
                f"{w.invoke.value.get('value')!r} as version {v}",
                p,
                w,
            )
        return
    w = by_value.get(ident)
    if w is None:
        bad(
            "garbage-read",
            f"{p.describe()} read {value!r} at version {v}, a value no write wrote",
            p,
        )
    elif w.type == "fail":
        bad(
            "aborted-read",
            f"{p.describe()} read {value!r} at version {v}, written by {w.describe()} which failed",
            p,
            w,
        )
    elif w.type == "ok":
        bad(
            "wrong-value",
            f"{p.describe()} read {value!r} at version {v}, but {w.describe()} made that "
            f"value version {_version(w, 'version')}",
            p,
            w,
        )
    else:
        expect = w.invoke.value.get("expect")
        if id(w) in placed and placed[id(w)] != v:
            bad(
                "applied-twice",
                f"{w.describe()}'s value {value!r} was read at versions {placed[id(w)]} and {v}",
                p,
                w,
            )
            return
        if expect is not None and v != expect + 1:
            bad(
                "cas-wrong-version",
                f"{w.describe()} expected version {expect}, but {p.describe()} read its "
                f"value at version {v}",
                p,
                w,
            )
        placed[id(w)] = v
        made[v] = w


def _late(o: _Obs, a: _Obs, bad: Any) -> None:
    def what(x: _Obs) -> str:
        return f"version {x.pos // 2}" if x.pos % 2 == 0 else f"version {x.pos // 2} (read)"

    seen = f"{a.pair.describe()} had completed with {what(a)} before {o.pair.describe()} began"
    if o.pos % 2:
        bad(
            "stale-read",
            f"{o.pair.describe()} saw version {o.pos // 2}, but {seen}",
            a.pair,
            o.pair,
        )
    else:
        bad(
            "real-time",
            f"{o.pair.describe()} made version {o.pos // 2}, but {seen}",
            a.pair,
            o.pair,
        )


class _Before:
    """The highest place among observations completed before a time, and which one."""

    def __init__(self, done: list[_Obs]) -> None:
        done = sorted(done, key=lambda o: o.stop)
        self.stops = [o.stop for o in done]
        self.best: list[tuple[int, _Obs | None]] = []
        cur: tuple[int, _Obs | None] = (-1, None)
        for o in done:
            if o.pos > cur[0]:
                cur = (o.pos, o)
            self.best.append(cur)

    def at(self, t: float) -> tuple[int, _Obs | None]:
        i = bisect.bisect_left(self.stops, t)  # completed strictly before t
        return self.best[i - 1] if i else (-1, None)


def _fill_gaps(
    highest: int,
    made: dict[int, Pair],
    obs: list[_Obs],
    free: list[Pair],
    before: _Before,
    bad: Any,
) -> int:
    """Give each version no write is known to have made an ``info`` write that could have
    made it; returns how many were needed."""
    gaps = [v for v in range(1, highest + 1) if v not in made]
    if not gaps:
        return 0
    # due[v]: the earliest completion of an operation that observed version >= v.
    due = [INF] * (highest + 2)
    for o in obs:
        v = min(o.pos // 2, highest)
        due[v] = min(due[v], o.stop)
    for v in range(highest - 1, -1, -1):
        due[v] = min(due[v], due[v + 1])
    due_list = due[1 : highest + 1]

    def ready(w: Pair) -> int:  # the lowest version w could have made
        m, _ = before.at(w.start)
        lowest = max(1, (m + 1) // 2)
        return max(lowest, bisect.bisect_right(due_list, w.start) + 1)

    blind = sorted(
        (ready(w), i) for i, w in enumerate(free) if w.invoke.value.get("expect") is None
    )
    cas: dict[int, list[int]] = defaultdict(list)
    for i, w in enumerate(free):
        e = w.invoke.value.get("expect")
        if e is not None and ready(w) <= e + 1:
            cas[e + 1].append(i)
    by_pos = sorted(obs, key=lambda o: o.pos)
    places = [o.pos for o in by_pos]
    pool, j, used = 0, 0, 0
    for v in gaps:
        while j < len(blind) and blind[j][0] <= v:
            pool, j = pool + 1, j + 1
        if cas.get(v):
            cas[v].pop()
        elif pool:
            pool -= 1
        else:
            first = by_pos[bisect.bisect_left(places, 2 * v)]
            bad(
                "phantom-version",
                f"version {v} was made (it was observed, or a later one was, first by "
                f"{first.pair.describe()}) but no write could have made it",
                first.pair,
            )
            continue
        used += 1
    return used
