"""``surefoot worker``: run an app's durable runs from a shared journal."""

from __future__ import annotations

import signal
import sqlite3
import threading
from pathlib import Path
from typing import Any

import click

from .. import durable, storage
from ..errors import ConfigError
from ._durable_plus import parse_age

__all__ = ["journal_missing", "worker"]

_CREATE_HINT = "check the --db URL for a typo, or pass --create to start a new, empty journal there"


def journal_missing(url: str) -> str | None:
    """Why ``url`` holds no durable journal yet (without creating one), or None if it does.

    SQLite: the file must exist and record surefoot's ``durable`` schema. PostgreSQL: the
    URL's schema must hold surefoot's tables with the ``durable`` component. Other URLs, and
    files that are not databases at all, are left to the journal's own checks (None).
    """
    parsed = storage.parse_url(url)
    if parsed.scheme == "sqlite":
        path = Path(parsed.path)
        if not path.exists():
            return f"the SQLite file {str(path)!r} does not exist"
        if path.is_dir():
            return None  # the journal says "is a directory"
        try:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error:
            return None
        try:
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if "surefoot_schema" not in tables:
                return f"the SQLite file {str(path)!r} has no surefoot journal in it" + (
                    f" (its tables: {', '.join(sorted(tables)[:5])})"
                    if tables
                    else " (it is empty)"
                )
            row = con.execute(
                "SELECT version FROM surefoot_schema WHERE component = 'durable'"
            ).fetchone()
        except sqlite3.DatabaseError:
            return None  # not a database: the journal's open says so clearly
        finally:
            con.close()
        return None if row else f"the SQLite file {str(path)!r} has surefoot data but no journal"
    if parsed.scheme == "postgresql":
        st: Any = storage.open(url)
        try:
            schema = st.db.schema
            found = st.db.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = 'surefoot_schema'",
                (schema,),
                write=False,
            )
            if not found:
                return f"schema {schema!r} at {storage.redact(url)!r} has no surefoot tables"
            row = st.db.execute(
                f"SELECT version FROM {schema}.surefoot_schema WHERE component = 'durable'",
                write=False,
            )
            return None if row else f"schema {schema!r} at {storage.redact(url)!r} has no journal"
        finally:
            st.close()
    return None


@click.command("worker")
@click.option("--db", required=True, help="Journal URL, e.g. sqlite:///runs.db.")
@click.option("--app", "app_ref", required=True, help="The App: 'package.module:app'.")
@click.option("--concurrency", default=8, show_default=True, help="Runs executed at once.")
@click.option(
    "--lease",
    type=float,
    default=None,
    help="Seconds a run is held without a heartbeat before another worker may take it.",
)
@click.option("--poll", type=float, default=None, help="Seconds between claims when idle.")
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
    type=float,
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

    Several workers may share one SQLite file. Stop with SIGTERM or Ctrl-C: runs in flight
    stay resumable by any worker. The journal must exist already (an app that started runs
    on it created it); pass --create to start a worker on a new, empty one.
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

    def _stop(signum: int, frame: object) -> None:
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
    try:
        w.run(stop, idle_exit=idle_exit)
    finally:
        app.close()
        for s, handler in before.items():
            signal.signal(s, handler)
