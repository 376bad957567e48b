"""Fixtures of the inspector tests: a demo journal and store, the app, a live server, a browser.

The browser tests drive Debian's ``chromium`` with Playwright; without it (or without the
``ui`` extra) they skip with the reason, and fail under SUREFOOT_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

REQUIRE = os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1"
BASE = "http://127.0.0.1:8765"


def _missing(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason}, and SUREFOOT_REQUIRE_SERVICES=1 requires it")
    pytest.skip(reason)


def need_ui_extra() -> None:
    """Skip (or fail under REQUIRE) when the ui extra is not installed."""
    for mod in ("starlette", "jinja2", "uvicorn", "httpx"):
        try:
            __import__(mod)
        except ImportError:
            _missing(f"the ui extra is not installed ({mod} is missing): pip install -e '.[ui]'")


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A journal with runs in every state and a store with keys and dead letters."""
    import demo_journal

    d = tmp_path_factory.mktemp("demo")
    db, store = f"sqlite:///{d / 'runs.db'}", f"sqlite:///{d / 'team.db'}"
    ids = demo_journal.build(db)
    demo_journal.build_store(store)
    return {"db": db, "store": store, "ids": ids, "dir": d}


def make_client(db: str, store: str | None = None, **kw: Any) -> Any:
    """A TestClient on the inspector over ``db``, as a loopback server sees requests."""
    need_ui_extra()
    with warnings.catch_warnings():
        # starlette's testclient names an anyio alias that anyio 4.12 deprecates; not ours
        warnings.simplefilter("ignore", DeprecationWarning)
        from starlette.testclient import TestClient

    from surefoot.ui import Inspector, create_app, loopback_hosts

    streams = ("tasks:summarizers",) if store else ()
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

    src = Inspector(db, store=store, streams=("tasks:summarizers",))
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


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[Live]:
    """An inspector over a fresh demo journal (runs in every state) and store."""
    need_ui_extra()
    import demo_journal

    db, store = f"sqlite:///{tmp_path / 'runs.db'}", f"sqlite:///{tmp_path / 'team.db'}"
    ids = demo_journal.build(db)
    demo_journal.build_store(store)
    with serve_inspector(db, store, ids) as live:
        yield live


@pytest.fixture
def hostile_server(tmp_path: Path) -> Iterator[Live]:
    """An inspector over a journal and store full of script, HTML and javascript: values."""
    need_ui_extra()
    import demo_journal

    db, store = f"sqlite:///{tmp_path / 'runs.db'}", f"sqlite:///{tmp_path / 'team.db'}"
    demo_journal.build_hostile(db, store)
    with serve_inspector(db, store, {}) as live:
        yield live


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian chromium under Playwright (skips when either is absent)."""
    need_ui_extra()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        _missing("chromium is not installed (bash .ci/install-chromium installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (it is in the dev dependency group)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser page (1366 px wide) that records dialogs and console errors."""
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    pg = ctx.new_page()
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    yield pg
    ctx.close()
