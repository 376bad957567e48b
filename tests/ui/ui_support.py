"""Helpers of the inspector tests (a module with its own name: ``conftest`` is not unique)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

REQUIRE = os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1"
BASE = "http://127.0.0.1:8765"


def missing(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
    pytest.skip(reason)


def need_ui_extra() -> None:
    """Skip (or fail under REQUIRE) when the ui extra is not installed."""
    for mod in ("starlette", "jinja2", "uvicorn", "httpx"):
        try:
            __import__(mod)
        except ImportError:
            missing(f"the ui extra is not installed ({mod} is missing): pip install -e '.[ui]'")


def make_client(
    db: str, store: str | None = None, *, streams: tuple[str, ...] = (), **kw: Any
) -> Any:
    """A TestClient on the inspector over ``db`` (every stream of ``store``, or those
    ``streams`` names as ``--stream`` does), as a loopback server sees requests."""
    need_ui_extra()
    with warnings.catch_warnings():
        # starlette's testclient names an anyio alias that anyio 4.12 deprecates; not ours
        warnings.simplefilter("ignore", DeprecationWarning)
        from starlette.testclient import TestClient

    from surefoot.ui import Inspector, create_app, loopback_hosts

    src = Inspector(db, store=store, streams=streams)
    app = create_app(src, allowed_hosts=loopback_hosts(8765), **kw)
    return TestClient(app, base_url=BASE)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Live:
    """A running inspector: its URL, journal and store."""

    def __init__(self, url: str, db: str, store: str, ids: dict[str, str]) -> None:
        self.url, self.db, self.store, self.ids = url, db, store, ids


@contextlib.contextmanager
def serve_inspector(db: str, store: str, ids: dict[str, str]) -> Iterator[Live]:
    """Serve an inspector on 127.0.0.1 (a free port) in a thread; stop it on exit."""
    import uvicorn

    from surefoot.ui import Inspector, create_app, loopback_hosts

    src = Inspector(db, store=store)  # no --stream: every stream of the store
    port = _free_port()
    app = create_app(src, allowed_hosts=loopback_hosts(port))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the inspector did not start within 10 s"
    try:
        yield Live(f"http://127.0.0.1:{port}", db, store, ids)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        src.close()
