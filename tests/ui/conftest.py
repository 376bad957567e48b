"""Fixtures of the inspector tests: a demo journal and store, a live server, a browser.

The browser tests drive Debian's ``chromium`` with Playwright; without it (or without the
``ui`` extra) they skip with the reason, and fail under SUREFOOT_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ui_support import Live, missing, need_ui_extra, serve_inspector


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A journal with runs in every state and a store with keys and dead letters."""
    import demo_journal

    d = tmp_path_factory.mktemp("demo")
    db, store = f"sqlite:///{d / 'runs.db'}", f"sqlite:///{d / 'team.db'}"
    ids = demo_journal.build(db)
    demo_journal.build_store(store)
    return {"db": db, "store": store, "ids": ids, "dir": d}


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


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian chromium under Playwright (skips when either is absent).

    Module-scoped: while Playwright's sync API is open, its event loop counts as running in
    this thread, so any later test's ``asyncio.run`` would fail; it closes with the module.
    """
    need_ui_extra()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        missing("chromium is not installed (bash .ci/install-chromium installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (it is in the dev dependency group)")
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
