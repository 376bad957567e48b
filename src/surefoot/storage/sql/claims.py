"""How the SQL journal claims runs: the statements shared by the journal's own claim, a
queue's claim (:mod:`.queues`) and the takeover of a dead holder's runs (:mod:`.liveness`).

A claim is one ``UPDATE … RETURNING`` that sets the run running under the claimer's lease
and raises its epoch by one, fencing the previous holder; its audit entry is written in
the claim's own transaction (no extra commit), built in SQL from the claimed rows.
"""

from __future__ import annotations

import json
from typing import Any

from ..runs import TAKEOVER_REASONS
from .dialect import ROWS, Dialect, Then
from .observed import ObservedLeases

__all__ = [
    "CLAIMABLE",
    "CLAIM_AUDIT",
    "ORPHAN_AUDIT",
    "RESUMABLE",
    "SQLClaims",
    "claim_audit",
    "claim_update",
    "claimable",
    "orphan_audit",
    "resumable",
]

_DUE = "(status = 'sleeping' AND wake_at IS NOT NULL AND wake_at <= ?)"


def _expired(vetted: str) -> str:
    lapsed = "(lease_until IS NULL OR lease_until < ?)"
    return f"(status = 'running' AND {lapsed}{f' AND {vetted}' if vetted else ''})"


def claimable(vetted: str = "") -> str:
    """:data:`CLAIMABLE`, and with ``vetted`` (:attr:`.observed.ObservedLeases.cond`) a
    running run with an expired lease only if vetted too: parameters ``now, now``, then
    ``vetted``'s."""
    return f"(status = 'pending' OR {_DUE} OR {_expired(vetted)})"


def resumable(vetted: str = "") -> str:
    """:data:`RESUMABLE`, with ``vetted`` as :func:`claimable`'s."""
    return f"({_DUE} OR {_expired(vetted)})"


#: A run a worker may take: pending; sleeping and due; running with an expired lease.
#: Parameters: ``now, now``.
CLAIMABLE = claimable()
#: A run a queue already started that may go on: sleeping and due, or its lease expired.
RESUMABLE = resumable()


def claim_update(d: Dialect, cond: str) -> str:
    """The claim of the runs matching ``cond``: parameters ``owner, lease_until, now``,
    then ``cond``'s; returns ``run_id, epoch, claims`` of each run taken.

    A run ``start()`` created running in its own process was never claimed (``claims``
    0): claiming it while it is still running takes it over from that first execution,
    so it counts as the second claim (audited ``taken_over``, not ``claimed``)."""
    return d.sql(
        "UPDATE durable_runs SET status = 'running', owner = ?, epoch = epoch + 1, "
        "claims = CASE WHEN status = 'running' AND claims = 0 THEN 2 ELSE claims + 1 END, "
        f"lease_until = ?, updated_at = ? WHERE {cond} RETURNING run_id, epoch, claims"
    )


_HEAD = "INSERT INTO durable_audit (run_id, at, actor, action, detail) SELECT run_id, ?, ?, "
_FIELDS = (
    """'{"worker":' || CAST(? AS TEXT) || ',"epoch":' || CAST(epoch AS TEXT) || """
    """',"claims":' || CAST(claims AS TEXT) || ',"claimed_at":' || CAST(? AS TEXT)"""
)
_TAKEN = (
    """',"previous_epoch":' || CAST(epoch - 1 AS TEXT) || ',"reason":"' || ? || """
    """'","why":"claimed again before the execution at epoch ' || CAST(epoch - 1 AS TEXT) """
    """|| ' finished or suspended: ' || ? || '"'"""
)
CLAIM_AUDIT = (
    f"{_HEAD}CASE WHEN claims > 1 THEN 'taken_over' ELSE 'claimed' END, {_FIELDS} || "
    f"CASE WHEN claims > 1 THEN {_TAKEN} ELSE '' END || '}}' FROM {ROWS}"
)
"""The audit entry of a claim, written in the claim's own transaction (no extra commit):
``claimed``, or ``taken_over`` when the run was claimed again before its previous execution
finished or suspended (``claims > 1``), with the previous epoch, the ``reason`` (a key of
:data:`~surefoot.storage.runs.TAKEOVER_REASONS`) and a ``why`` sentence. The detail is
JSON built in SQL from the claimed rows (``epoch``, ``claims``) and this claim's worker,
time and reason. Parameters: :func:`claim_audit`'s.
"""

ORPHAN_AUDIT = (
    f"{_HEAD}'taken_over', {_FIELDS} || {_TAKEN} || "
    f"""',"holder_dead":' || CAST(? AS TEXT) || '}}' FROM {ROWS}"""
)
"""The ``taken_over`` entry of a takeover of a dead holder's run: :data:`CLAIM_AUDIT`'s
parameters (reason ``holder_dead``), then the ``holder_dead`` JSON."""


def claim_audit(d: Dialect, owner: str, now: float, reason: str | None = None) -> Then:
    """The :data:`CLAIM_AUDIT` statement of one claim by ``owner`` at ``now``; it reads the
    claimed rows' ``run_id``, ``epoch`` and ``claims`` (the claim must return them).
    ``reason``: why a run in flight changes hands (default ``lease_expired``, the only
    way a claim that is not forced takes a running run).

    Raises:
        ValueError: ``reason`` is not a key of ``TAKEOVER_REASONS``.
    """
    code = reason or "lease_expired"
    why = TAKEOVER_REASONS.get(code)
    if why is None:
        raise ValueError(
            f"unknown takeover reason {code!r}; use one of {', '.join(TAKEOVER_REASONS)}"
        )
    return Then(
        d.sql(CLAIM_AUDIT),
        (float(now), owner, json.dumps(owner), repr(float(now)), code, why),
        "durable_runs",
        "run_id",
    )


def orphan_audit(
    d: Dialect, owner: str, now: float, holder: str, lease_until: float, how: str
) -> Then:
    """The ``taken_over`` entry of a claim of a run whose holder's process died
    (``claim_orphans``): as :func:`claim_audit`'s (reason ``holder_dead``), plus
    ``holder_dead``: the ``holder``, the ``lease_until`` not waited out, and ``how`` its
    death was seen."""
    dead = json.dumps({"holder": holder, "lease_until": lease_until, "how": how})
    base = claim_audit(d, owner, now, "holder_dead").params
    return Then(d.sql(ORPHAN_AUDIT), (*base, dead), "durable_runs", "run_id")


class SQLClaims:
    """The journal's own claim: one run by id, or the runs of some workflow versions that
    are in no named queue (:class:`~.queues.SQLQueues` claims those).

    ``observed`` (SQLite): a running run with an expired lease is taken only if
    :meth:`.ObservedLeases.vet` allows it (a live holder's lease seen unchanged for a
    full lease); None: the wall clock alone decides."""

    def __init__(self, d: Dialect, observed: ObservedLeases | None = None) -> None:
        self.d = d
        self.observed = observed
        self._vetted = "" if observed is None else observed.cond
        self._statements: dict[tuple[str, int], tuple[str, str | None]] = {}

    def claim(
        self,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: list[tuple[str, str]],
        limit: int,
        run_id: str | None = None,
        force: bool = False,
        reason: str | None = None,
    ) -> list[tuple[str, int]]:
        """Take up to ``limit`` claimable runs of ``workflows`` (or exactly ``run_id``).

        Claimable: pending; sleeping and due; running with an expired lease (and, with
        ``observed``, vetted by it). With ``force`` (``run_id`` only), also a running run
        whose lease is held by ``owner`` itself (this worker's previous life) or a sleeping
        run that is not yet due. Returns (run_id, new epoch) pairs; the epoch goes up by
        one, fencing the previous holder. On PostgreSQL, runs locked by another claimer are
        skipped. ``reason``: what a ``taken_over`` entry says moved a run in flight (see
        :func:`claim_audit`).
        """
        if run_id is None and not workflows:
            return []
        wf: list[Any] = [x for w in workflows for x in (w[0], w[1])]
        # an idle poll, nothing claimable even by the wall clock, costs no vetting
        loose = None if self.observed is None or run_id is not None else len(workflows)
        if loose is not None and not self.d.read(self._loose(loose), [now, now, *wf, limit]):
            return []
        vet = [] if self.observed is None else [self.observed.vet(now, lease_until - now)]
        if run_id is not None:
            params: list[Any] = [run_id, owner, now] if force else [run_id, now, now]
            params += vet
            shape: tuple[str, int] = ("force" if force else "one", 0)
        else:
            params = [now, now, *vet, *wf, int(limit)]
            shape = ("queue", len(workflows))
        update, probe = self._statements.get(shape) or self._claim_sql(shape)
        # Re-sending a claim whose reply was lost is safe: the runs it took stay fenced to
        # this owner until their lease runs out, then any worker claims them again.
        rows = self.d.poll_write(
            update,
            (owner, lease_until, now, *params),
            None if probe is None else (probe, params),
            claim_audit(self.d, owner, now, reason),  # claimed / taken_over, same commit
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    def _loose(self, n: int) -> str:
        """The probe of a claim of ``n`` workflows by the wall clock alone (no vetting)."""
        got = self._statements.get(("loose", n))
        if got is None:
            got = self._statements["loose", n] = (self._claim_sql(("queue", n), "")[1] or "", None)
        return got[0]

    def _claim_sql(
        self, shape: tuple[str, int], vetted: str | None = None
    ) -> tuple[str, str | None]:
        """The claim's UPDATE and its look-before-lock probe, built once per shape: a
        single run (``one``, or ``force``d) or the queue of ``n`` workflows."""
        mode, n = shape
        probe: str | None = None
        cache = vetted is None  # a probe by the wall clock alone is kept by _loose
        vetted = self._vetted if vetted is None else vetted
        if mode == "force":
            lapsed = "(lease_until IS NULL OR lease_until < ?)"
            if vetted:
                lapsed = f"({lapsed} AND {vetted})"
            cond = (
                "run_id = ? AND (status IN ('pending', 'sleeping') OR (status = 'running' AND "
                f"(owner = ? OR {lapsed})))"
            )
        elif mode == "one":
            cond = f"run_id = ? AND {claimable(vetted)}"
        else:
            values = ", ".join("(?, ?)" for _ in range(n))
            # Runs in a named queue are claimed by the queue's claim, under its limits.
            cond = (
                f"run_id IN (SELECT run_id FROM durable_runs WHERE {claimable(vetted)} AND "
                "queue IS NULL AND "
                f"(workflow, version) IN (VALUES {values}) "
                f"ORDER BY COALESCE(wake_at, created_at) LIMIT ?{self.d.skip_locked})"
            )
            # An idle worker polls often: SQLite looks before taking the write lock.
            probe = self.d.sql(f"SELECT 1 FROM durable_runs WHERE {cond} LIMIT 1")
        update = claim_update(self.d, cond)
        if cache:
            self._statements[shape] = (update, probe)
        return update, probe
