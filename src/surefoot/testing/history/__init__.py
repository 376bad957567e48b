"""Recording what concurrent clients did, in Jepsen's shape, for the checkers to judge.

::

    from surefoot.testing.history import Recorder, record_write, record_read

    with Recorder("hist-%d.jsonl" % os.getpid()) as rec:    # one file per OS process
        c = rec.client()                                   # one client per thread
        record_write(c, store, "k", "a1", expect=0)
        record_read(c, store, "k")
    history = History.load(*glob.glob("hist-*.jsonl"))     # merged by monotonic time

A history is operations in real-time order: ``invoke``, then ``ok`` / ``fail`` / ``info``
(unknown outcome: the client continues under a fresh process id). ``History.dump`` /
``History.load`` read and write JSON lines. Timestamps are ``time.monotonic_ns()``: the
processes of a history must run on one host (see ``Recorder``).

The ``record_*`` helpers wrap surefoot's public calls (Store reads, writes and merges,
multi-key transactions, stream appends, fetches, acks and dead letters, journal reads) and
``recorded_step`` wraps a durable step body; their shapes are listed in
``surefoot.testing.checkers``, which reads them.
"""

from __future__ import annotations

from ._ops import COMPLETIONS, TYPES, History, Op, Pair
from ._record import (
    record_ack,
    record_append,
    record_append_txn,
    record_dead_letters,
    record_fetch,
    record_journal,
    record_list_read,
    record_read,
    record_stream_append,
    record_write,
    recorded_step,
)
from ._recorder import Client, Recorder

__all__ = [
    "COMPLETIONS",
    "TYPES",
    "Client",
    "History",
    "Op",
    "Pair",
    "Recorder",
    "record_ack",
    "record_append",
    "record_append_txn",
    "record_dead_letters",
    "record_fetch",
    "record_journal",
    "record_list_read",
    "record_read",
    "record_stream_append",
    "record_write",
    "recorded_step",
]
