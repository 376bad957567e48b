"""``surefoot worker``: run an app's durable runs from a shared journal."""

from __future__ import annotations

import os
import signal
import sys
import threading

import click

from .. import durable, storage
from ..errors import ConfigError
from ..storage import journal_missing
from ._options import Seconds
from ._workload import parse_age

__all__ = ["journal_missing", "worker"]

_CREATE_HINT = "check the --db URL for a typo, or pass --create to start a new, empty journal there"


@click.command("worker")
@click.option(
    "--db",
    required=True,
    envvar="SUREFOOT_DB",
    help="Journal URL, e.g. sqlite:///runs.db (or env SUREFOOT_DB: a URL with a password is "
    "then not on the command line, where ps shows it).",
)
@click.option("--app", "app_ref", required=True, help="The App: 'package.module:app'.")
@click.option("--concurrency", default=8, show_default=True, help="Runs executed at once.")
@click.option(
    "--lease",
    type=float,
    default=None,
    help="Seconds a run is held without a heartbeat before another worker may take it.",
)
@click.option(
    "--poll",
    type=Seconds(positive=True, why="0 would claim without pause and spin a core; e.g. 0.2"),
    default=None,
    help="Seconds between claims when idle (> 0).",
)
@click.option(
    "--worker-id",
    default=None,
    help="Stable name; a worker restarted with the same id takes its runs back at once.",
)
@click.option(
    "--max-claims",
    type=click.IntRange(min=1),
    default=None,
    help="Claims of one run without it suspending or finishing (each means a worker died "
    "holding it) before it is parked in needs_attention (default 10).",
)
@click.option(
    "--create",
    is_flag=True,
    default=False,
    help="Create the journal if it is not there yet (a new SQLite file, or surefoot's tables "
    "in the PostgreSQL schema). Without it a missing journal is refused, so a typo in --db "
    "cannot start an empty journal that waits forever.",
)
@click.option(
    "--prune-older-than",
    default=None,
    help="Retention: delete finished runs that ended longer ago than this (7d, 12h).",
)
@click.option("--prune-keep", type=int, default=None, help="Retention: keep the newest N.")
@click.option(
    "--prune-every", type=float, default=60.0, show_default=True, help="Seconds between prunes."
)
@click.option(
    "--prune-audit",
    type=click.Choice(["keep", "drop"]),
    default="keep",
    show_default=True,
    help="Retention: keep the pruned runs' audit logs or delete them too.",
)
@click.option(
    "--idle-exit",
    type=Seconds(why="0 exits as soon as there is nothing to do"),
    default=None,
    help="Exit after this many idle seconds (default: run until SIGTERM/SIGINT).",
)
def worker(
    db: str,
    app_ref: str,
    concurrency: int,
    lease: float | None,
    poll: float | None,
    worker_id: str | None,
    max_claims: int | None,
    create: bool,
    prune_older_than: str | None,
    prune_keep: int | None,
    prune_audit: str,
    prune_every: float,
    idle_exit: float | None,
) -> None:
    """Claim runs under a lease, execute them, and resume runs abandoned by dead workers.

    Several workers may share one SQLite file. Stop with SIGTERM or Ctrl-C (exit 0): the
    worker says which runs it left in flight; they stay resumable by any worker once their
    lease expires, and at once by a worker started with the same --worker-id (a step still
    executing is abandoned, as in a crash: it records nothing more). The journal
    must exist already (an app that started runs on it created it); pass --create to start
    a worker on a new, empty one.
    """
    app = durable.load_app(app_ref)
    missing = journal_missing(db)
    if missing is not None and not create:
        raise ConfigError(f"surefoot worker --db {storage.redact(db)!r}: {missing}; {_CREATE_HINT}")
    app.configure(url=db, lease=lease, poll=poll, worker_id=worker_id, max_claims=max_claims)
    # Open (and migrate) the journal once before serving: a file that is not a database or
    # a schema from a newer surefoot stops the worker here with one line (exit 1); only
    # failures after this are outages that the worker backs off through.
    app.journal  # noqa: B018 - opening it is the point
    stop = threading.Event()
    stopped_by: list[str] = []

    def _stop(signum: int, frame: object) -> None:
        stopped_by.append(signal.Signals(signum).name)
        stop.set()

    before = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    retention = None
    if prune_older_than is not None or prune_keep is not None:
        age = None if prune_older_than is None else parse_age(prune_older_than)
        retention = durable.Retention.make(age, prune_keep, prune_audit, prune_every)
    w = durable.Worker(app, concurrency=concurrency, retention=retention)
    if missing is not None:
        click.echo(
            f"surefoot worker: created a new, empty journal at {storage.redact(db)} "
            f"(--create; {missing} before)",
            err=True,
        )
    click.echo(
        f"surefoot worker {app.worker_id}: {len(app.registered())} workflow version(s), "
        f"lease {app.lease:g} s, concurrency {concurrency}, max claims {app.max_claims}",
        err=True,
    )
    held: list[str] = []
    try:
        w.run(stop, idle_exit=idle_exit)
        held = w.in_flight()
        why = stopped_by[0] if stopped_by else f"idle for {idle_exit:g} s"
        click.echo(_stopped_line(app, why, held), err=True)
    finally:
        app.close()
        for s, handler in before.items():
            signal.signal(s, handler)
    if stopped_by and held:
        # A sync step still executing in a pool thread would hold the interpreter's exit
        # until it returns; its run is released (it records nothing more) and resumes from
        # its journal, as after a crash, so the process ends now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _stopped_line(app: durable.App, why: str, held: list[str]) -> str:
    """What a stopped worker says: why it stopped and which runs it left to resume."""
    head = f"surefoot worker {app.worker_id} stopped ({why})"
    if not held:
        return f"{head}: no runs in flight"
    shown = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
    runs = "1 run" if len(held) == 1 else f"{len(held)} runs"
    return (
        f"{head}: {runs} in flight released ({shown}); they resume after their lease "
        f"({app.lease:g} s) from any worker, at once under --worker-id {app.worker_id}"
    )
