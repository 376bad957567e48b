"""``surefoot queues``, ``surefoot schedules``, ``surefoot runs prune``, ``runs children``
and ``runs stranded``: a journal's workload beyond one run: where runs come from (queues,
schedules), how long finished ones stay (retention), which runs a run started (children)
and which runs no live worker serves (versions).

Like ``surefoot runs``, every command takes ``--db URL`` and prints a table, or JSON with
``--json``; they only read or change the journal.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .. import durable
from ..errors import ConfigError
from ._runs import must_exist, runs, status_markup

__all__ = ["queues", "schedules"]


@contextmanager
def _app(db: str) -> Iterator[durable.App]:
    must_exist(db)
    app = durable.App(db)
    try:
        yield app
    finally:
        app.close()


def _echo_json(v: Any) -> None:
    def plain(x: Any) -> Any:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return dataclasses.asdict(x)
        return repr(x)

    click.echo(json.dumps(v, indent=2, default=plain))


def _when(t: float | None) -> str:
    return "-" if t is None else dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _db_option(f: Any) -> Any:
    return click.option("--db", required=True, help="Journal URL, e.g. sqlite:///runs.db.")(f)


def _json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_age(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``12h``, ``7d`` or ``2w``.

    Raises:
        ConfigError: anything else.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if m is None:
        raise ConfigError(
            f"--older-than takes a number with an optional unit s/m/h/d/w (e.g. 7d), got {text!r}"
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


@runs.command("prune")
@_db_option
@click.option("--older-than", default=None, help="Finished more than this long ago: 7d, 12h.")
@click.option("--keep", type=int, default=None, help="Keep the newest N finished runs.")
@click.option(
    "--audit",
    type=click.Choice(["keep", "drop"]),
    default="keep",
    show_default=True,
    help="Keep the pruned runs' audit logs (with a 'pruned' entry) or delete them.",
)
@_json_option
def prune(db: str, older_than: str | None, keep: int | None, audit: str, as_json: bool) -> None:
    """Delete finished runs (succeeded, failed, cancelled) by age or count."""
    age = None if older_than is None else parse_age(older_than)
    with _app(db) as app:
        gone = app.prune(older_than=age, keep=keep, audit=audit)
    if as_json:
        _echo_json({"pruned": gone, "audit": audit})
        return
    click.echo(
        f"pruned {len(gone)} finished run(s); audit {'kept' if audit == 'keep' else 'dropped'}"
    )


@runs.command("children")
@click.argument("run_id")
@_db_option
@_json_option
def children(db: str, run_id: str, as_json: bool) -> None:
    """The child runs a run started, and their status."""
    with _app(db) as app:
        app.handle(run_id)  # UnknownRunError for a mistyped id
        kids = app.journal.children.of(run_id)
    if as_json:
        _echo_json([{"run_id": k.run_id, "workflow": k.workflow, "status": k.status} for k in kids])
        return
    t = Table("child run", "workflow", "status", "updated")
    for k in kids:
        t.add_row(k.run_id, k.workflow, status_markup(k.status), _when(k.updated_at))
    Console().print(t)


@runs.command("stranded")
@_db_option
@_json_option
def stranded(db: str, as_json: bool) -> None:
    """Unfinished runs whose workflow version no live worker offers, and what to do."""
    with _app(db) as app:
        rows = app.stranded()
    if as_json:
        _echo_json(rows)
        return
    t = Table("run", "workflow", "version", "status", "what to do")
    for r in rows:
        t.add_row(r["run_id"], r["workflow"], r["version"], status_markup(r["status"]), r["todo"])
    Console().print(t)


@click.command("queues")
@_db_option
@_json_option
def queues(db: str, as_json: bool) -> None:
    """Named queues: their limits and how many runs each holds per status."""
    with _app(db) as app:
        view = app.queues()
    if as_json:
        _echo_json(view)
        return
    t = Table("queue", "concurrency", "per worker", "rate", "runs")
    for q in view:
        rate = "-" if q["rate"] is None else f"{q['rate'][0]} per {q['rate'][1]:g} s"
        counts = ", ".join(f"{k} {v}" for k, v in sorted(q["runs"].items())) or "-"
        t.add_row(
            q["queue"],
            str(q["concurrency"] or "-"),
            str(q["worker_concurrency"] or "-"),
            rate,
            counts,
        )
    Console().print(t)


@click.command("schedules")
@_db_option
@_json_option
def schedules(db: str, as_json: bool) -> None:
    """Cron schedules recorded by workers: the workflow, the cron and the next tick."""
    with _app(db) as app:
        rows = app.journal.schedules.all()
    if as_json:
        _echo_json(
            [
                {
                    "schedule": r.name,
                    "workflow": r.workflow,
                    "cron": r.cron,
                    "catchup": r.catchup,
                    "next_at": r.next_at,
                }
                for r in rows
            ]
        )
        return
    t = Table("schedule", "workflow", "cron (UTC)", "catch-up", "next tick")
    for r in rows:
        when = dt.datetime.fromtimestamp(r.next_at, dt.UTC).isoformat()
        t.add_row(r.name, r.workflow, r.cron, r.catchup, when)
    Console().print(t)
