"""``surefoot ui``: serve the local web inspector of runs, shared state and streams."""

from __future__ import annotations

import os

import click

from .. import storage
from ..errors import ConfigError
from ._runs import load_app, must_exist

__all__ = ["ui"]


def _store_must_exist(store: str) -> None:
    """A ``sqlite:///file`` store must exist: opening a mistyped path would create one."""
    scheme, sep, rest = store.partition("://")
    if not sep or scheme.lower() != "sqlite" or rest.split("?")[0] in ("", "/"):
        return
    path = storage.parse_url(store).path
    if not os.path.exists(path):
        raise ConfigError(f"no store at {path!r} (from --store {store!r}); check the path")


@click.command("ui")
@click.option("--db", required=True, help="Journal URL, e.g. sqlite:///runs.db.")
@click.option(
    "--app",
    "app_ref",
    default=None,
    help="Your App ('module:app'), to read runs stored through its payload codec.",
)
@click.option("--store", default=None, help="Statebus storage URL for shared state and streams.")
@click.option("--namespace", default="default", show_default=True, help="Store namespace.")
@click.option(
    "--stream",
    "streams",
    multiple=True,
    metavar="NAME[:GROUP,…]",
    help="Show only this stream (and these consumer groups); repeatable, needs --store. "
    "Without it every stream of the store is shown.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to bind."
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host (then --token is required).",
)
@click.option(
    "--token",
    envvar="SUREFOOT_UI_TOKEN",
    default=None,
    help="Access token every request must carry (env SUREFOOT_UI_TOKEN).",
)
def ui(
    db: str,
    app_ref: str | None,
    store: str | None,
    namespace: str,
    streams: tuple[str, ...],
    host: str,
    port: int,
    allow_remote: bool,
    token: str | None,
) -> None:
    """Serve a web inspector of runs, workers, shared state and dead letters (the ui extra).

    It binds 127.0.0.1 by default. Binding any other address needs --allow-remote and an
    access token, and says so on start. Every action asks for confirmation and goes to the
    run's audit log, through the same calls as `surefoot runs`.
    """
    from .. import ui as inspector  # stdlib at import; serve() names the extra if missing

    must_exist(db)
    if store is not None:
        _store_must_exist(store)
    app = None if app_ref is None else load_app(db, app_ref)
    source = inspector.Inspector(db, store=store, namespace=namespace, streams=streams, app=app)
    try:
        inspector.serve(
            source,
            host=host,
            port=port,
            allow_remote=allow_remote,
            token=token,
            announce=click.echo,
        )
    finally:
        source.close()
