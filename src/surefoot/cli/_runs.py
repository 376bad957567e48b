"""``surefoot runs``: list, show, resume, cancel, retry, resolve, fork and signal runs.

Every command takes ``--db URL``. ``--app module:app`` loads the workflows so ``resume``
(and ``retry``/``fork`` with ``--wait``) can execute the run here; the other commands only
read or change the journal. ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .. import durable, storage
from ..errors import ConfigError, JournalError, RunFailedError, TimeoutError_
from ._render import print_fitted

__all__ = ["runs", "status_markup"]

_S = durable.RunStatus
_COLOR: dict[str, str] = {
    _S.SUCCEEDED: "green",
    _S.FAILED: "red",
    _S.CANCELLED: "dim",
    _S.NEEDS_ATTENTION: "bold magenta",
    _S.RUNNING: "cyan",
    _S.SLEEPING: "yellow",
    _S.PENDING: "blue",
}


# What a SQLite file holds when it is not a journal, told by one of its tables.
_NOT_A_JOURNAL = {
    "sf_state": "statebus shared state",
    "sf_stream": "statebus streams",
    "surefoot_keys": "idempotency keys",
    "agent_calls": "the lab agent's ledger",
}


def _tables(path: str, db: str) -> set[str]:
    """The tables of SQLite file ``path``, read without changing it."""
    try:
        return storage.sqlite_tables(path)
    except ConfigError as exc:
        raise ConfigError(
            f"{exc} (from --db {storage.redact(db)!r}); pass the journal's URL, the one the "
            "worker uses"
        ) from None


def must_exist(db: str) -> None:
    """A ``sqlite:///file`` journal must already exist and be a journal: these commands
    look at runs in it.

    Opening a missing file would create an empty journal (a typo in the path would look
    like "no runs"); opening a statebus file or a ledger would add journal tables to it.
    Both are refused before anything is opened for writing. A PostgreSQL schema without a
    journal is refused the same way: looking never creates a schema or a table.
    """
    scheme, sep, rest = db.partition("://")
    if sep and scheme.lower() in ("postgres", "postgresql"):
        why = storage.journal_missing(db)
        if why is not None:
            raise ConfigError(
                f"no durable journal at --db {storage.redact(db)!r}: {why}. Nothing was "
                "created; pass the journal the worker uses (surefoot worker --db URL)"
            )
        return
    if not sep or scheme.lower() != "sqlite" or rest.split("?")[0] in ("", "/"):
        return
    path = storage.parse_url(db).path
    if not os.path.exists(path):
        raise ConfigError(
            f"no database at {path!r} (from --db {storage.redact(db)!r}); check the path"
        )
    tables = _tables(path, db)
    if "durable_runs" in tables:
        return
    held = sorted({what for t, what in _NOT_A_JOURNAL.items() if t in tables})
    if held:
        what = "it holds " + " and ".join(held)
    elif tables:
        what = "its tables are " + ", ".join(sorted(tables)[:5])
    else:
        what = "it has no tables"
    raise ConfigError(
        f"{path!r} (from --db {storage.redact(db)!r}) is not a durable journal: {what}. "
        "Nothing was changed; pass the journal the worker uses (surefoot worker --db URL)"
    )


def _load(db: str, app_ref: str | None) -> durable.App:
    must_exist(db)
    if app_ref is None:
        return durable.App(db)
    loader = getattr(durable, "load_app", None)
    if loader is not None:
        app: durable.App = loader(app_ref)
    else:  # pragma: no cover - older engines without load_app
        import importlib

        mod, _, attr = app_ref.partition(":")
        if not mod or not attr:
            raise ConfigError(f"--app must look like 'package.module:app', got {app_ref!r}")
        app = getattr(importlib.import_module(mod), attr)
    app.configure(url=db)
    return app


@contextmanager
def _app(db: str, app_ref: str | None) -> Iterator[durable.App]:
    app = _load(db, app_ref)
    try:
        yield app
    finally:
        app.close()


# for the commands of other modules that read runs the same way (--db, optional --app)
load_app = _load
open_app = _app


def _plain(v: Any) -> Any:
    """Values as JSON can hold them (results may be any codec value)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if v is None or isinstance(v, str | int | float | bool):
        return v
    return repr(v)


def _echo_json(v: Any) -> None:
    click.echo(json.dumps(_plain(v), indent=2))


def _short(v: Any, width: int = 60) -> str:
    text = v if isinstance(v, str) else json.dumps(_plain(v), default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def status_markup(s: str) -> str:
    """A run or step status in its colour (rich markup)."""
    return f"[{_COLOR.get(s, 'white')}]{s}[/]"


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{1000 * s:,.1f}"


def _db_option(f: Any) -> Any:
    return click.option("--db", required=True, help="Journal URL, e.g. sqlite:///runs.db.")(f)


def _app_option(f: Any) -> Any:
    return click.option(
        "--app", "app_ref", default=None, help="The App with the workflows: 'module:app'."
    )(f)


def _json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


@click.group()
def runs() -> None:
    """Look at and steer durable runs in a journal."""


@runs.command("list")
@_db_option
@_app_option
@click.option("--status", default=None, type=click.Choice(durable.STATUSES), help="Only these.")
@click.option("--workflow", default=None, help="Only runs of this workflow.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="At most this many runs.",
)
@_json_option
def list_(
    db: str,
    app_ref: str | None,
    status: str | None,
    workflow: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List runs, newest first."""
    with _app(db, app_ref) as app:
        rows = app.list_runs(status=status, workflow=workflow, limit=limit)
    if as_json:
        _echo_json(rows)
        return
    con = Console()
    # piped: a file has no right edge, so every column is kept and nothing is folded
    width = con.width if con.is_terminal else _UNBOUNDED
    table, need = runs_table(rows, width, title=f"runs in {storage.redact(db)}")
    if not con.is_terminal:
        con.width = max(need, con.width)
    con.print(table)


_UNBOUNDED = 1_000_000  # the width runs_table is given when output is not a terminal


# The columns of ``runs list``: (header, essential). Optional ones are dropped, last first,
# until the table fits: run, workflow and status are never cut.
_LIST_COLUMNS = (
    ("run", True),
    ("workflow", True),
    ("status", True),
    ("updated", False),
    ("version", False),
    ("owner", False),
    ("epoch", False),
    ("strategy", False),
)


def runs_table(rows: list[Any], width: int, *, title: str = "") -> tuple[Table, int]:
    """The ``runs list`` table for ``width`` columns, and the width it needs unfolded.

    Optional columns are dropped (strategy first, then epoch, owner, version, updated) until
    the table fits; run, workflow and status are kept whole. If even those do not fit, the
    status keeps its width and the run id (then the workflow) folds onto more lines, every
    character kept; the width returned lets piped output be printed unfolded instead.
    """
    cells = [
        {
            "run": r.run_id,
            "workflow": r.workflow,
            "status": r.status,
            "updated": _when(r.updated_at),
            "version": r.version,
            "owner": r.owner or "-",
            "epoch": str(r.epoch),
            "strategy": r.strategy,
        }
        for r in rows
    ]
    need = {h: max([len(h), *(len(c[h]) for c in cells)]) for h, _ in _LIST_COLUMNS}
    shown = [h for h, _ in _LIST_COLUMNS]
    optional = [h for h, essential in reversed(_LIST_COLUMNS) if not essential]

    def total() -> int:  # the default box: one border and two spaces of padding per column
        return sum(need[h] + 3 for h in shown) + 1

    while total() > width and optional:
        shown.remove(optional.pop(0))
    fits = total() <= width
    fixed: dict[str, int] = {}
    if not fits:
        # too narrow even for run, workflow and status: the status keeps its width, the
        # workflow gets up to half of what is left, the run id folds in the rest
        avail = max(3, width - 1 - 3 * len(shown))
        fixed["status"] = min(need["status"], max(1, avail - 2))
        rest = max(2, avail - fixed["status"])
        fixed["workflow"] = min(need["workflow"], max(1, rest // 2))
        fixed["run"] = max(1, rest - fixed["workflow"])
        if fixed["run"] > need["run"]:
            fixed["workflow"] = min(need["workflow"], rest - need["run"])
            fixed["run"] = need["run"]
    t = Table(title=title or None, title_justify="left")
    for h in shown:
        t.add_column(
            h,
            justify="right" if h == "epoch" else "left",
            no_wrap=fits,
            overflow="fold",
            min_width=need[h] if fits else None,
            width=fixed.get(h),
        )
    for c in cells:
        t.add_row(*(status_markup(c[h]) if h == "status" else c[h] for h in shown))
    return t, total()


@runs.command("show")
@click.argument("run_id")
@_db_option
@_app_option
@_json_option
@click.option(
    "--width",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Truncate results to this width.",
)
def show(db: str, app_ref: str | None, run_id: str, as_json: bool, width: int) -> None:
    """Show a run: header (version, lease), steps with timings and results, the audit log."""
    with _app(db, app_ref) as app:
        d = app.show(run_id)
    if as_json:
        _echo_json(d)
        return
    r = d.run
    con = Console()
    head = Table(title=f"run {r.run_id}", title_justify="left", show_header=False)
    head.add_column("field", style="bold")
    head.add_column("value")
    head.add_row("status", status_markup(r.status))
    head.add_row("workflow", f"{r.workflow} version {r.version} (structure {r.structure_hash})")
    head.add_row("strategy", r.strategy)
    head.add_row("arguments", _short([r.args, r.kwargs], width))
    head.add_row(
        "lease",
        f"owner {r.owner or '-'}, epoch {r.epoch}, until {_when(r.lease_until)}, claims {r.claims}",
    )
    if r.status == "sleeping":
        names = r.waiting_for.split(", ") if r.waiting_for else []
        why = "signal " + ", ".join(repr(n) for n in names) if names else "timer"
        head.add_row("waiting for", f"{why}, wake at {_when(r.wake_at)}")
    if d.stranded:
        head.add_row(
            "stranded",
            f"[bold red]no live worker offers {r.workflow} version {r.version}[/]; start one "
            "with that version registered",
        )
    if r.forked_from:
        head.add_row("forked from", r.forked_from)
    if r.status == "succeeded":
        head.add_row("result", _short(r.result, width))
    if r.error:
        head.add_row("error", f"[red]{r.error.get('type')}: {r.error.get('message')}[/]")
    head.add_row("created / updated", f"{_when(r.created_at)} / {_when(r.updated_at)}")
    print_fitted(con, head)
    st = Table(title="steps", title_justify="left")
    for c in ("pos", "step", "kind", "status", "attempts", "ms", "result / error"):
        st.add_column(c, justify="right" if c in ("attempts", "ms") else "left")
    for s in d.steps:
        out = (
            f"[red]{s.error.get('type')}: {_short(s.error.get('message'), width)}[/]"
            if s.error
            else _short(s.result, width)
        )
        st.add_row(
            s.pos, s.name, s.kind, status_markup(s.status), str(s.attempts), _ms(s.duration), out
        )
    print_fitted(con, st)
    au = Table(title="audit log", title_justify="left")
    for c in ("#", "at", "actor", "action", "detail"):
        au.add_column(c)
    for a in d.audit:
        au.add_row(str(a.seq), _when(a.at), a.actor, a.action, _short(a.detail, 2 * width))
    print_fitted(con, au)


def _need_app(wait: bool, app_ref: str | None) -> None:
    if wait and app_ref is None:
        raise ConfigError("--wait executes the run here; pass --app module:app with its workflow")


def _parse_json(text: str | None, what: str) -> Any:
    try:
        return None if text is None else json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} must be JSON, got {text!r} ({exc}); quote strings: '\"yes\"'"
        ) from None


def _wait(handle: durable.RunHandle, timeout: float) -> str:
    try:
        handle.result(timeout=timeout)
    except RunFailedError as exc:
        return exc.status
    except TimeoutError_:
        pass
    return handle.status()


def _report(
    app: durable.App, run_id: str, what: str, as_json: bool, *, waited: float | None = None
) -> None:
    """Print what was done and the run's status now. ``waited``: the command waited up to
    that many seconds for the run's end (resume, retry/fork --wait). A run that ended
    without a result (failed, cancelled, needs_attention) then raises ``RunFailedError``
    after the report, and one that has not ended ``TimeoutError_``, so the command exits 1
    with one line on stderr, as ``engine start --wait`` does."""
    info = app.show(run_id).run
    if as_json:
        _echo_json({"run_id": run_id, "action": what, "status": info.status})
    else:
        Console().print(f"{what} {run_id}: now {status_markup(info.status)}")
    if waited is None:
        return
    if info.status in _NO_RESULT:
        raise RunFailedError(run_id, info.status, info.error)
    if info.status != _S.SUCCEEDED:
        raise TimeoutError_(
            waited,
            f"run {run_id!r} has not ended within --timeout {waited:g} s (it is "
            f"{info.status}); it goes on: a worker carries it on, or `surefoot runs resume "
            f"{run_id}` with a longer --timeout. See `surefoot runs show {run_id} --db URL`",
        )


# A run that ended in one of these has no result: a command that waited for it exits 1.
_NO_RESULT = frozenset({_S.FAILED, _S.CANCELLED, _S.NEEDS_ATTENTION})


@runs.command("resume")
@click.argument("run_id")
@_db_option
@_app_option
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds to wait for the end (exit 1 if it has not ended by then).",
)
@_json_option
def resume(db: str, app_ref: str | None, run_id: str, timeout: float, as_json: bool) -> None:
    """Run an unfinished run here now (needs --app), waiting up to --timeout for its end.

    A run that has already ended is left alone: the command says nothing was resumed
    (exit 0). Exit status: 0 when the run succeeded, 1 when it ended failed, cancelled or
    needs_attention, or has not ended at --timeout (its status printed, the error on stderr),
    as engine start --wait.
    """
    if app_ref is None:
        raise ConfigError("resume executes the run here; pass --app module:app with its workflow")
    with _app(db, app_ref) as app:
        status = app.show(run_id).run.status
        if status == "needs_attention":
            raise ConfigError(
                f"run {run_id!r} needs attention, so nothing was resumed; see why with "
                f"`surefoot runs show {run_id}`, fix the cause, then `surefoot runs retry "
                f"{run_id}`"
            )
        if status in durable.TERMINAL:
            if as_json:
                _echo_json({"run_id": run_id, "action": "none", "resumed": False, "status": status})
            else:
                Console().print(
                    f"run {run_id} has already ended ({status_markup(status)}); nothing was resumed"
                )
            return
        _wait(app.resume(run_id), timeout)
        row = app.show(run_id).run
        if row.status == "running" and row.owner != app.worker_id:
            left = max(0.0, (row.lease_until or 0) - app.clock.now())
            raise JournalError(
                f"run {run_id!r} was not resumed within --timeout {timeout:g} s: worker "
                f"{row.owner!r} (alive, or not known to be gone) still holds it at epoch "
                f"{row.epoch}, and its lease runs out in {left:.1f} s; run this command again "
                "then, or with a longer --timeout"
            )
        _report(app, run_id, "resumed", as_json, waited=timeout)


@runs.command("cancel")
@click.argument("run_id")
@_db_option
@_app_option
@click.option("--reason", default="", help="Why (kept in the audit log).")
@_json_option
def cancel(db: str, app_ref: str | None, run_id: str, reason: str, as_json: bool) -> None:
    """Cancel an unfinished run; a worker running it is fenced off at its next write."""
    with _app(db, app_ref) as app:
        if not app.cancel(run_id, reason=reason):
            raise ConfigError(f"run {run_id!r} has already ended; nothing to cancel")
        _report(app, run_id, "cancelled", as_json)


@runs.command("retry")
@click.argument("run_id")
@_db_option
@_app_option
@click.option("--reason", default="", help="What was fixed (kept in the audit log).")
@click.option(
    "--wait",
    "wait_",
    is_flag=True,
    help="Execute it here now (needs --app); exit 1 if it ends without a result or has not "
    "ended at --timeout.",
)
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds to wait with --wait.",
)
@_json_option
def retry(
    db: str,
    app_ref: str | None,
    run_id: str,
    reason: str,
    wait_: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Send a needs_attention or failed run back to work after a fix (workers pick it up).

    A failed run goes on from its failed step: the steps that ended in an error run
    again; every step journalled as done is kept and replays. With --wait, exit status 1
    when the run ends failed, cancelled or needs_attention again, or has not ended at
    --timeout (the error on stderr).
    """
    _need_app(wait_, app_ref)
    with _app(db, app_ref) as app:
        handle = app.retry(run_id, reason=reason)
        if wait_:
            _wait(handle, timeout)
        _report(app, run_id, "retried", as_json, waited=timeout if wait_ else None)


@runs.command("resolve")
@click.argument("run_id")
@click.argument("step")
@click.argument("result", required=False, default=None)
@_db_option
@_app_option
@click.option("--reason", default="", help="How you checked (kept in the audit log).")
@_json_option
def resolve(
    db: str,
    app_ref: str | None,
    run_id: str,
    step: str,
    result: str | None,
    reason: str,
    as_json: bool,
) -> None:
    """Record that effect STEP of unknown outcome did happen (with its JSON RESULT).

    For a needs_attention run stopped at an effect that takes no key: after checking that
    it happened, this journals it as done, so the run goes on without running it again.
    """
    value = _parse_json(result, "RESULT")
    with _app(db, app_ref) as app:
        app.resolve(run_id, step, value, reason=reason)
        _report(app, run_id, f"resolved step {step} of", as_json)


@runs.command("fork")
@click.argument("run_id")
@click.argument("step")
@_db_option
@_app_option
@click.option("--new-id", default=None, help="The new run's id (default: RUN-fork-xxxx).")
@click.option(
    "--wait",
    "wait_",
    is_flag=True,
    help="Execute it here now (needs --app); exit 1 if it ends without a result or has not "
    "ended at --timeout.",
)
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds to wait with --wait.",
)
@_json_option
def fork(
    db: str,
    app_ref: str | None,
    run_id: str,
    step: str,
    new_id: str | None,
    wait_: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Start a new run that reuses RUN_ID's journal before STEP and runs STEP onwards again.

    With --wait, exit status 1 when the new run ends failed, cancelled or needs_attention,
    or has not ended at --timeout.
    """
    _need_app(wait_, app_ref)
    with _app(db, app_ref) as app:
        handle = app.fork(run_id, step, new_run_id=new_id)
        if wait_:
            _wait(handle, timeout)
        what = f"forked {run_id} at step {step} as"
        _report(app, handle.run_id, what, as_json, waited=timeout if wait_ else None)


@runs.command("signal")
@click.argument("run_id")
@click.argument("name")
@click.argument("payload", required=False, default=None)
@_db_option
@_app_option
@click.option("--id", "signal_id", default=None, help="Deliver at most once per this id.")
@_json_option
def signal(
    db: str,
    app_ref: str | None,
    run_id: str,
    name: str,
    payload: str | None,
    signal_id: str | None,
    as_json: bool,
) -> None:
    """Deliver signal NAME (with a JSON PAYLOAD) to a run waiting in app.wait_for(NAME).

    A run that has ended is refused (exit 1). A run not waiting for NAME now keeps the
    signal until a wait_for(NAME) takes it.
    """
    value = _parse_json(payload, "PAYLOAD")
    with _app(db, app_ref) as app:
        sent = app.signal(run_id, name, value, signal_id=signal_id)
        info = app.show(run_id).run
        waits = info.waiting_for.split(", ") if info.waiting_for else []
        waiting = info.status == "sleeping" and name in waits
        if as_json:
            _echo_json(
                {
                    "run_id": run_id,
                    "signal": name,
                    "delivered": sent,
                    "status": info.status,
                    "waiting_for": waits,
                }
            )
        elif sent and info.status == "sleeping" and not waiting:
            Console().print(
                f"signal {name!r} queued for {run_id}: it waits for "
                f"{', '.join(repr(w) for w in waits) or 'a timer'} now; the signal is kept "
                f"until a wait_for({name!r}) takes it"
            )
        elif sent:
            Console().print(f"signal {name!r} sent to {run_id} (now {status_markup(info.status)})")
        else:
            Console().print(
                f"signal id {signal_id!r} was already delivered to {run_id}; nothing sent"
            )
