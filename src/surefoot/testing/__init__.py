"""Helpers for *your* tests: virtual time, and a model provider that fails on cue.

``FakeClock`` advances instantly and records every sleep; pass it wherever surefoot takes a
``clock``. ``instant_retries()`` makes retries given no clock wait on a ``FakeClock``.

``FakeProvider`` is a local HTTP server (127.0.0.1, a free port) speaking the OpenAI
chat-completions and Anthropic messages wire formats, streaming included, whose faults are
scripted per request (``Status``, ``rate_limited``, ``insufficient_quota``, ``overloaded``,
``Reply(delay=…)``, ``DropBeforeReply``, ``DropMidReply``, ``StreamError``). Point the real
SDKs (or surefoot's adapters) at it and count what it received. The same server runs as
``surefoot fake-provider --port N``.

The fakes that count what they receive in-process (``FakeLLM``, fault injectors) live in
``surefoot.llm`` and ``surefoot.resilience.faults``.

Evidence that concurrent use stays correct: ``history`` records what concurrent clients did
(Jepsen's invoke / ok / fail / info, JSON lines, one file per OS process); ``checkers`` judge
such a history by itself (linearizability of versioned writes, Elle's list-append cycles,
streams, durable steps). ``FaultProxy`` sits between a client and PostgreSQL or Redis and
drops the reply to a COMMIT or EXEC, resets, blackholes or delays connections on cue.
``run_chaos`` (``surefoot chaos``) runs your own app's workflow in real worker processes
SIGKILLed at random and checks every run.
"""

from __future__ import annotations

from . import checkers, history
from ._chaos import ChaosReport, run_chaos
from ._clock import FakeClock, instant_retries
from ._faults import (
    DropBeforeReply,
    DropMidReply,
    Fault,
    Reply,
    Status,
    StreamError,
    insufficient_quota,
    overloaded,
    parse_fault,
    rate_limited,
)
from ._provider import FakeProvider, Received
from ._proxy import FaultProxy, ProxyCounts

__all__ = [
    "ChaosReport",
    "DropBeforeReply",
    "DropMidReply",
    "FakeClock",
    "FakeProvider",
    "Fault",
    "FaultProxy",
    "ProxyCounts",
    "Received",
    "Reply",
    "Status",
    "StreamError",
    "checkers",
    "history",
    "instant_retries",
    "insufficient_quota",
    "overloaded",
    "parse_fault",
    "rate_limited",
    "run_chaos",
]
