"""``surefoot engine …``: runs on another engine (Temporal): worker, start, signal, show."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import sys
from typing import Any, NoReturn

import click

from .. import codec, durable
from ..durable.engine import engine_scheme
from ..errors import ConfigError, SurefootError

_URL_HELP = "The engine URL, e.g. temporal://127.0.0.1:7233?namespace=default&task_queue=q."


def _app(app_ref: str, url: str) -> durable.App:
    if engine_scheme(url) is None:
        raise ConfigError(
            f"--url {url!r} names no engine; give temporal://HOST:PORT?task_queue=Q "
            "(a journal URL is served by `surefoot worker --db URL`)"
        )
    app = durable.load_app(app_ref)
    app.configure(url=url)
    return app


def _json_arg(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"{what} must be JSON ({exc.msg}), got {text!r}") from None


@click.group("engine")
def engine() -> None:
    """Run an app's workflows on another engine (Temporal), chosen by --url."""


@engine.command("worker")
@click.option("--app", "app_ref", required=True, help="The App: 'package.module:app'.")
@click.option("--url", required=True, help=_URL_HELP)
def worker(app_ref: str, url: str) -> None:
    """Serve the app's workflows and steps on the engine until SIGTERM or Ctrl-C.

    Prints one line once it polls its task queue. Runs in flight stay on the engine: any
    worker of the same app on the same task queue carries them on.
    """
    app = _app(app_ref, url)
    from ..engines.temporal import serve

    def ready(line: str) -> None:
        click.echo(line)

    try:
        asyncio.run(serve(app, url, ready=ready))
    except KeyboardInterrupt:
        pass
    except SurefootError as exc:  # an unknown namespace, say: one line, and no abort at exit
        click.echo(f"surefoot: error: {exc}", err=True)
        _exit_now(1)
    _exit_now()


def _exit_now(code: int = 0) -> NoReturn:
    """End the process now that the worker has shut down in its loop (exit ``code``).

    The SDK's Rust core keeps threads of its own that may call into Python while the
    interpreter finalizes, which aborts the process (rc -6 "PyGILState_Release …
    finalizing", or -11) on some stops (temporalio/sdk-python#300). So after the exit
    handlers ran (logs flushed, exporters closed), the process ends without finalizing.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


@engine.command("start")
@click.argument("workflow")
@click.argument("args_json", required=False)
@click.option("--app", "app_ref", required=True, help="The App: 'package.module:app'.")
@click.option("--url", required=True, help=_URL_HELP)
@click.option("--run-id", default=None, help="The run's id (default: a new one).")
@click.option(
    "--wait",
    type=float,
    default=None,
    help="Wait this many seconds for the result and print it (default: print the id); exit 1 "
    "if the run ends without a result or has not ended by then.",
)
def start(
    workflow: str,
    args_json: str | None,
    app_ref: str,
    url: str,
    run_id: str | None,
    wait: float | None,
) -> None:
    """Start WORKFLOW with ARGS_JSON (a JSON list of positional arguments) for the workers.

    The same --run-id again gives the same run; other arguments for it are refused.
    """
    args = _json_arg(args_json, "ARGS_JSON")
    if args is None:
        args = []
    if not isinstance(args, list):
        raise click.BadParameter(f"ARGS_JSON must be a JSON list, got {args_json!r}")
    app = _app(app_ref, url)
    try:
        handle = app.enqueue(workflow, *args, run_id=run_id)
        if wait is None:
            click.echo(handle.run_id)
            return
        click.echo(codec.dumps(handle.result(timeout=wait)))
    finally:
        app.close()


@engine.command("signal")
@click.argument("run_id")
@click.argument("name")
@click.argument("payload_json", required=False)
@click.option("--app", "app_ref", required=True, help="The App: 'package.module:app'.")
@click.option("--url", required=True, help=_URL_HELP)
@click.option("--id", "signal_id", default=None, help="Signal id: delivered once per id.")
def signal(
    run_id: str, name: str, payload_json: str | None, app_ref: str, url: str, signal_id: str | None
) -> None:
    """Deliver signal NAME with PAYLOAD_JSON to RUN_ID (once per --id)."""
    payload = _json_arg(payload_json, "PAYLOAD_JSON")
    app = _app(app_ref, url)
    try:
        sent = app.signal(run_id, name, payload, signal_id=signal_id)
    finally:
        app.close()
    click.echo("sent" if sent else f"already delivered (signal id {signal_id!r}); nothing sent")


@engine.command("show")
@click.argument("run_id")
@click.option("--app", "app_ref", required=True, help="The App: 'package.module:app'.")
@click.option("--url", required=True, help=_URL_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
def show(run_id: str, app_ref: str, url: str, as_json: bool) -> None:
    """The run's header (workflow, version, status, arguments, result or error) and its audit.

    Every event of the run (each step's activity, attempts, timers, signals) is in the
    Temporal UI, or `temporal workflow show --workflow-id RUN_ID --address HOST:PORT`.
    """
    app = _app(app_ref, url)
    try:
        handle = app.handle(run_id)
        info = handle.info()
        audit: list[tuple[str, Any]] = getattr(handle, "audit", lambda: [])()
    finally:
        app.close()
    data = {
        "run_id": info.run_id,
        "workflow": info.workflow,
        "version": info.version,
        "status": info.status,
        "args": info.args,
        "kwargs": info.kwargs,
        "result": info.result,
        "error": info.error,
        "audit": [{"action": a, "detail": d} for a, d in audit],
    }
    if as_json:
        click.echo(codec.dumps(data))
        return
    for key in ("run_id", "workflow", "version", "status", "args", "kwargs", "result", "error"):
        value = data[key]
        if value not in (None, {}, []) or key in ("status", "args"):
            click.echo(f"{key:<9} {value if isinstance(value, str) else codec.dumps(value)}")
    for entry in data["audit"]:
        click.echo(f"audit     {entry['action']}: {codec.dumps(entry['detail'])}")
