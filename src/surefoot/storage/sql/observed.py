"""Leases judged by observation as well as by the wall clock (SQLite).

A lease is a wall-clock time written by its holder and compared with the claimer's wall
clock, so a claimer whose clock runs ahead of the holder's by more than the lease sees
every live lease as expired. PostgreSQL and Redis judge leases on the server's clock
(``ServerClock``); SQLite has no server, so there a claimer also judges by what it saw.

A running run whose lease has expired by the claimer's clock is taken:

* at once when its holder's process is gone (its liveness lock is free) or when nothing is
  known of it (no lock file: another host, or a holder with no lock): the wall clock
  decides, as before;
* when its holder's process is alive (its lock is held: maybe paused or hung), only after
  this process has seen that run's lease unchanged (same epoch, same ``lease_until``) for
  a full lease (the claimer's) on its own monotonic clock. A live holder renews every
  third of its lease, which changes ``lease_until``, so however far the claimer's wall
  clock is off it never takes over a holder that renews at least once per claimer's
  lease (any holder whose lease is at most three times the claimer's); a paused holder is
  taken over about a lease after its lease first looked expired here.

:meth:`ObservedLeases.vet` reads the running runs whose lease has expired (one statement),
and returns the runs that may be taken now as the parameter of :attr:`ObservedLeases.cond`,
which a claim ANDs to its expired-lease condition (:func:`~.claims.claimable`). The list
is positive (run id and epoch as seen), so a run whose lease expired or changed hands after
the look is not taken by that claim. What this process saw lives in its memory only: a
restarted claimer starts observing again (a paused holder waits one lease more).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from .dialect import Dialect

__all__ = ["ObservedLeases", "Sightings"]

_EXPIRED = (
    "SELECT run_id, epoch, owner, lease_until FROM durable_runs "
    "WHERE status = 'running' AND (lease_until IS NULL OR lease_until < ?)"
)


class Sightings:
    """How long this process has seen each lease unchanged, on its monotonic clock.

    ``monotonic``: the clock (a simulation gives its own). Thread-safe.
    """

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self._seen: dict[str, tuple[Hashable, float]] = {}
        self._lock = threading.Lock()

    def unchanged_for(self, name: str, stamp: Hashable) -> float:
        """Seconds since ``name`` was first seen with ``stamp`` (0.0 now: first seen, or
        its stamp changed since the last look)."""
        t = self.monotonic()
        with self._lock:
            prev = self._seen.get(name)
            if prev is None or prev[0] != stamp:
                self._seen[name] = (stamp, t)
                return 0.0
            return t - prev[1]

    def forget(self, name: str) -> None:
        """Drop what was seen of ``name`` (it was taken, or is no longer a lease to judge)."""
        with self._lock:
            self._seen.pop(name, None)

    def keep(self, names: set[str]) -> None:
        """Forget every name but ``names`` (the leases still to judge)."""
        with self._lock:
            self._seen = {n: v for n, v in self._seen.items() if n in names}


class ObservedLeases:
    """Which running runs with an expired lease a claimer may take now (module docs).

    Args:
        d: the journal's dialect. alive: those of the given worker ids whose process is
            known alive (their liveness lock is held by another process).

    Attributes:
        cond: the condition a claim ANDs to its expired lease; its one parameter is
            :meth:`vet`'s answer.
        sightings: what this process saw, on its monotonic clock (a simulation gives its
            own clock).
    """

    def __init__(self, d: Dialect, alive: Callable[[set[str]], set[str]]) -> None:
        self.d = d
        self.alive = alive
        self.cond = d.any_of("run_id || '/' || CAST(epoch AS TEXT)")
        self.sightings = Sightings()
        self._expired = d.sql(_EXPIRED)
        self._lock = threading.Lock()

    def vet(self, now: float, lease: float) -> Any:
        """The running runs whose lease expired before ``now`` that may be taken now, as
        :attr:`cond`'s parameter: those of dead or unknown holders, and those of live
        holders seen unchanged for ``lease`` seconds (the claimer's lease) on this
        process's monotonic clock."""
        with self._lock:  # one look at a time: each forgets what the others did not see
            rows = self.d.read(self._expired, (float(now),))
            holders = {str(r[2]) for r in rows if r[2] is not None}
            alive = self.alive(holders) if holders else set()
            ok: list[str] = []
            watched: set[str] = set()
            for run_id, epoch, holder, until in rows:
                key = f"{run_id}/{int(epoch)}"
                if holder is None or str(holder) not in alive:
                    ok.append(key)  # gone, or nothing known: the wall clock decides
                    continue
                watched.add(str(run_id))
                stamp = (int(epoch), None if until is None else float(until))
                if self.sightings.unchanged_for(str(run_id), stamp) >= lease:
                    ok.append(key)
            # runs no longer expired (renewed, ended, taken) are forgotten
            self.sightings.keep(watched)
            return self.d.array(ok)
