"""How pytest-xdist spreads the suite over workers (``make unit`` runs ``-n``).

``--dist loadfile`` (pyproject.toml) hands out whole test files, so a module-scoped fixture
(a browser, a 35 s lab run, a built wheel) is built once, not once on every worker that
gets one of its tests. The files under ``SHARED_DIRS`` go out together as one unit: they
share a session fixture better started once than once per worker. The local model server
(tests/local_llm) runs with two threads, one per core, and two of them would only slow
each other down; the Temporal dev server of tests/conformance starts in ~0.3 s but then
idles at ~2.5 % of a core until its worker ends. Cheap session fixtures (the service URLs,
the demo journal of the inspector tests) are built once per worker.

Handing out single tests with ``xdist_group`` marks on the costly ones would balance finer,
but pytest 9.2 with pytest-xdist 3.8 silently ignores the marks (pytest-dev/pytest-xdist
#1386: the group rides on the node id, which a plugin can no longer rewrite), and on this
suite whole files balance as well (a simulation on the serial durations: 392 s either way
on 2 workers).
"""

from __future__ import annotations

from typing import Any

import pytest

SHARED_DIRS = ("tests/conformance/", "tests/local_llm/")
"""Directories whose files go to one worker, one after the other."""


def scope_of(nodeid: str) -> str:
    """The unit of work ``nodeid`` belongs to: its shared directory, or its file."""
    path = nodeid.split("::", 1)[0]
    return next((d for d in SHARED_DIRS if path.startswith(d)), path)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile``, whole files, and the files of a shared directory together."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedDirScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SharedDirScheduling(config, log)
