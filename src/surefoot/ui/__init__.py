"""``surefoot ui``: a local web inspector of runs, shared state, streams and dead letters.

::

    surefoot ui --db sqlite:///runs.db --store sqlite:///team.db

Pages are rendered on the server (Starlette + Jinja2, the ``ui`` extra) and carry no script;
every value from a journal or a store is escaped text. It binds 127.0.0.1; any other address
needs ``--allow-remote`` and an access token. See ``docs/ui.md``.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ._events import TokenStreamApp
from ._source import Inspector, RunsQuery

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["Inspector", "RunsQuery", "TokenStreamApp", "create_app", "is_loopback", "serve"]

_EXTRA = "the inspector needs the ui extra: pip install 'surefoot[ui]'"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(
    source: Inspector, *, token: str | None = None, allowed_hosts: set[str] | None = None
) -> Starlette:
    """The inspector's ASGI app over ``source`` (see ``_server.build_app``).

    Raises:
        ConfigError: the ``ui`` extra is not installed.
    """
    try:
        from ._server import build_app
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ConfigError(f"{_EXTRA} ({exc})") from None
    return build_app(source, token=token, allowed_hosts=allowed_hosts)


def loopback_hosts(port: int) -> set[str]:
    """The Host headers a loopback server answers (anything else may be DNS rebinding)."""
    return {f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")} | {
        "127.0.0.1",
        "localhost",
    }


def serve(
    source: Inspector,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_remote: bool = False,
    token: str | None = None,
    announce: Any = print,
) -> None:
    """Serve the inspector until interrupted.

    Args:
        host / port: where to listen; a non-loopback host needs ``allow_remote`` and a token.
        token: the access token (required beyond loopback; optional on loopback).
        announce: where the start line goes.

    Raises:
        ConfigError: a non-loopback host without ``allow_remote`` or without a token, or
            the ``ui`` extra is missing.
    """
    remote = not is_loopback(host)
    if remote and not allow_remote:
        raise ConfigError(
            f"--host {host!r} is not a loopback address; the inspector shows and changes runs, "
            "so binding it beyond this machine needs --allow-remote and --token TOKEN"
        )
    if remote and not token:
        raise ConfigError(
            f"--host {host!r} with --allow-remote needs an access token: pass --token TOKEN "
            "(or set SUREFOOT_UI_TOKEN); every request must then carry it"
        )
    try:
        import uvicorn
    except ImportError as exc:
        raise ConfigError(f"{_EXTRA} ({exc})") from None
    app = create_app(source, token=token, allowed_hosts=None if remote else loopback_hosts(port))
    if remote:
        announce(
            f"surefoot ui: serving {source.db} on http://{host}:{port}/ BEYOND LOOPBACK; "
            "every request needs the access token (open it once with ?token=…)"
        )
    else:
        announce(f"surefoot ui: serving {source.db} on http://{host}:{port}/ (loopback only)")
    uvicorn.run(app, host=host, port=port, log_level="warning")
