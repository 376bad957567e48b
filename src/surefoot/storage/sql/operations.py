"""What operators and senders do to a run from outside it, in the SQL journal: move it
between statuses fencing its holder (retry, resolve, resume), signal it, fork it.

A part of :class:`~.journal.SQLJournal` (which offers ``operator``, ``signal`` and ``fork``
as its own), written once for SQLite and PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from ...errors import ConfigError, RunConflictError, UnknownRunError
from ..checks import check_size
from ..runs import RunRow, StepWrite
from .chunks import SQLChunks
from .dialect import Dialect
from .schema import AUDIT_SQL, CHANNEL, EPOCH, RUN_COLS, RUN_MARKS, SEL, StepSQL, run_params

__all__ = ["SQLOperations"]


class SQLOperations:
    """Operators' and senders' writes to a run (see the module docs).

    Args:
        d: the journal's dialect. steps: the backend's step statements.
        put_step: writes one step record inside a transaction (the journal's statement).
        check_values: refuses step results over the store's ``max_value_bytes``.
        chunks: the journal's chunks (a fork copies the run's).
    """

    def __init__(
        self,
        d: Dialect,
        steps: StepSQL,
        put_step: Callable[[Any, StepWrite], Any],
        check_values: Callable[[list[StepWrite]], None],
        chunks: SQLChunks,
    ) -> None:
        self.d = d
        self.url = d.url
        self._steps = steps
        self._put_step = put_step
        self._check_values = check_values
        self._chunks = chunks
        self._audit = d.sql(AUDIT_SQL)
        self._get = d.sql(f"SELECT {SEL} FROM durable_runs WHERE run_id = ?")

    def operator(
        self,
        run_id: str,
        *,
        status: str,
        from_statuses: tuple[str, ...],
        now: float,
        actor: str,
        action: str,
        detail: str,
        reset_steps: list[str] | None = None,
        put_steps: list[StepWrite] | None = None,
    ) -> RunRow | None:
        """Move a run to ``status`` if it is in ``from_statuses``, fencing any holder.

        Bumps the epoch (a worker still running it is refused at its next write), deletes
        the ``reset_steps`` rows (so they run again), writes the ``put_steps`` rows (under
        the new epoch; e.g. an outcome a person resolved) and appends an audit entry, in one
        transaction. Returns the updated row, or None if the run was in another status.

        Raises:
            UnknownRunError: no such run.
        """
        d = self.d
        self._check_values(put_steps or [])
        exists = d.sql("SELECT 1 FROM durable_runs WHERE run_id = ?" + d.row_lock)
        move = d.sql(
            "UPDATE durable_runs SET status = ?, epoch = epoch + 1, owner = NULL, claims = 0, "
            "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = ? "
            f"WHERE run_id = ? AND {d.any_of('status')} RETURNING {SEL}"
        )
        delete = d.sql(self._steps.delete)

        def work(c: Any) -> RunRow | None:
            if not c.execute(exists, (run_id,)).fetchone():
                raise UnknownRunError(run_id, self.url)
            row = c.execute(move, (status, now, run_id, d.array(from_statuses))).fetchone()
            if row is None:
                return None
            for pos in reset_steps or ():
                c.execute(delete, (run_id, pos))
            for w in put_steps or ():
                self._put_step(c, dataclasses.replace(w, run_id=run_id, epoch=row[EPOCH]))
            c.execute(self._audit, (run_id, now, actor, action, detail))
            if status == "pending":
                d.notify_run(c, CHANNEL, run_id)
            return RunRow(*row)

        return d.transaction(work)

    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool:
        """Queue a signal for a run; wake the run if it sleeps waiting for ``name``.

        Returns False when ``signal_id`` was already delivered (nothing changed).

        Raises:
            UnknownRunError: no such run.
        """
        d = self.d
        what = f"the payload of signal {name!r} to run {run_id!r}"
        check_size(self.url, what, payload, d.max_value_bytes)
        # a run going to sleep waits for this signal to commit, or this signal for the
        # sleep (see SQLJournal.__init__)
        exists = d.sql("SELECT 1 FROM durable_runs WHERE run_id = ?" + d.key_share)
        insert = d.sql(
            "INSERT INTO durable_signals (run_id, name, payload, signal_id, sent_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, signal_id) DO NOTHING"
        )
        wake = d.sql(
            "UPDATE durable_runs SET wake_at = ? WHERE run_id = ? AND status = 'sleeping' "
            f"AND {d.member('waiting_for', '?')}"
        )

        def work(c: Any) -> bool:
            if not c.execute(exists, (run_id,)).fetchone():
                raise UnknownRunError(run_id, self.url)
            if c.execute(insert, (run_id, name, payload, signal_id, now)).rowcount != 1:
                return False
            if c.execute(wake, (now, run_id, name)).rowcount:
                d.notify_run(c, CHANNEL, run_id)
            return True

        return d.transaction(work, idempotent=signal_id is not None)

    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow:
        """Copy a run's header (as pending) and its steps journalled before ``before_pos``.

        Raises:
            UnknownRunError: no such run.
            ConfigError: the run has no step at ``before_pos``.
            RunConflictError: ``new_run_id`` is taken.
        """
        d, seq = self.d, self.d.step_seq
        at_sql = d.sql(self._steps.at.format(seq=seq))
        insert = d.sql(
            f"INSERT INTO durable_runs ({RUN_COLS}) VALUES ({RUN_MARKS}) "
            "ON CONFLICT (run_id) DO NOTHING"
        )
        copy = d.sql(self._steps.copy.format(seq=seq))

        def work(c: Any) -> RunRow:
            src = c.execute(self._get, (run_id,)).fetchone()
            if src is None:
                raise UnknownRunError(run_id, self.url)
            at = c.execute(at_sql, (run_id, before_pos)).fetchone()
            if at is None:
                raise ConfigError(
                    f"run {run_id!r} has no journalled step at position {before_pos!r}; see "
                    f"the positions with `surefoot runs show {run_id}`"
                )
            old = RunRow(*src)
            row = RunRow(
                run_id=new_run_id,
                workflow=old.workflow,
                version=old.version,
                structure_hash=old.structure_hash,
                args=old.args,
                strategy=old.strategy,
                status="pending",
                created_at=now,
                updated_at=now,
                forked_from=run_id,
            )
            if c.execute(insert, run_params(row)).rowcount != 1:
                raise RunConflictError(
                    new_run_id, f"run id {new_run_id!r} is taken; fork to another id"
                )
            c.execute(copy, (new_run_id, run_id, at[0]))
            self._chunks.copy(c, run_id, new_run_id)  # the copied steps' chunked values
            forked = json.dumps({"from": run_id, "before": before_pos})
            c.execute(self._audit, (new_run_id, now, "operator", "forked", forked))
            d.notify_run(c, CHANNEL, new_run_id)
            return row

        return d.transaction(work)
