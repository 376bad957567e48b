"""The agent's fake outside world: a model, a search tool, a reader and a publisher.

Each service records what it receives in the :class:`Ledger` at the moment it acts, then
takes ``reply_latency`` seconds to answer: a worker killed in that gap has caused the effect
(or paid for the tokens) without learning so, which is exactly the window journals exist for.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

from surefoot.clock import Clock, SystemClock
from surefoot.errors import ConfigError
from surefoot.llm import FakeLLM

from ._ledger import Ledger

__all__ = ["MODEL", "AgentServices", "PublishError"]

MODEL = "fake-agent-model"
"""The model name the agent asks for; answered by the seeded FakeLLM (a real model, set by
``SUREFOOT_AGENT_LLM_URL``, answers under its own name)."""


class PublishError(Exception):
    """The publishing service refused a request (an injected failure)."""


def _words(seed: str, n: int) -> list[str]:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return [h[i : i + 6] for i in range(0, min(n * 6, len(h) - 6), 6)]


class AgentServices:
    """The fake model, tools and publisher one agent process talks to.

    Args:
        ledger: where requests are counted (a :class:`Ledger` or its file path).
        seed: the FakeLLM's seed (fixes every answer).
        clock: latencies are spent on it (use the durable app's clock).
        latency: seconds each request takes before the service acts.
        reply_latency: seconds after the service acted until the caller hears back.
        honour_keys: the publisher deduplicates by idempotency key (False: it ignores keys).
        fail_publish: channels whose publish request always fails.
        fail_unpublish: channels whose unpublish request always fails.
        llm: the model: a ``surefoot.llm`` client, or None for the seeded FakeLLM, unless
            ``SUREFOOT_AGENT_LLM_URL`` names a real endpoint (``surefoot lab run --llm``
            sets it for the agent's workers): then a client on it, with surefoot's retries.

    Raises:
        ConfigError: a negative latency.
    """

    def __init__(
        self,
        ledger: Ledger | str | os.PathLike[str],
        *,
        seed: int = 0,
        clock: Clock | None = None,
        latency: float = 0.0,
        reply_latency: float = 0.0,
        honour_keys: bool = True,
        fail_publish: Iterable[str] = (),
        fail_unpublish: Iterable[str] = (),
        llm: Any = None,
    ) -> None:
        if latency < 0 or reply_latency < 0:
            raise ConfigError(
                f"latencies must be >= 0 s, got latency={latency!r} reply_latency={reply_latency!r}"
            )
        self.ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
        self.clock: Clock = clock or SystemClock()
        self.real = llm is not None and not isinstance(llm, FakeLLM)
        if llm is None:
            from ..local_model import LabModel

            lab_llm = LabModel.from_env()
            if lab_llm is not None:
                llm, self.real = lab_llm.client(), True
        self.llm: Any = llm if llm is not None else FakeLLM(seed=seed, clock=self.clock)
        self.latency = float(latency)
        self.reply_latency = float(reply_latency)
        self.honour_keys = honour_keys
        self.fail_publish = set(fail_publish)
        self.fail_unpublish = set(fail_unpublish)

    @classmethod
    def from_env(cls, clock: Clock | None = None) -> AgentServices:
        """Services configured by ``SUREFOOT_AGENT_LEDGER`` (required), ``…_SEED``,
        ``…_LATENCY`` and ``…_REPLY_LATENCY`` (what worker processes use).

        Raises:
            ConfigError: ``SUREFOOT_AGENT_LEDGER`` is unset or a number is malformed.
        """
        path = os.environ.get("SUREFOOT_AGENT_LEDGER", "")
        if not path:
            raise ConfigError(
                "SUREFOOT_AGENT_LEDGER is not set; point it at the ledger file the agent's "
                "fake services record into (the chaos harness sets it for its workers)"
            )
        try:
            seed = int(os.environ.get("SUREFOOT_AGENT_SEED", "0"))
            latency = float(os.environ.get("SUREFOOT_AGENT_LATENCY", "0"))
            reply = float(os.environ.get("SUREFOOT_AGENT_REPLY_LATENCY", "0"))
        except ValueError as exc:
            raise ConfigError(f"bad SUREFOOT_AGENT_* number: {exc}") from None
        return cls(path, seed=seed, clock=clock, latency=latency, reply_latency=reply)

    async def _wait(self, s: float) -> None:
        if s > 0:
            await self.clock.asleep(s)

    # -- the services ---------------------------------------------------------------------

    async def ask(self, run: str, step: str, prompt: str) -> str:
        """A model call: billed (and recorded) when the model answers."""
        await self._wait(self.latency)
        messages = [{"role": "user", "content": prompt}]
        if self.real:  # under its own name, with the client's bounded max_tokens
            resp = await self.llm.acreate(
                messages=messages, temperature=0, max_tokens=self.llm.max_tokens
            )
        else:
            resp = await self.llm.acreate(model=MODEL, messages=messages)
        self.ledger.record(
            run,
            "model",
            step,
            at=self.clock.now(),
            tokens=resp.usage.total_tokens,
            cost=resp.cost or 0.0,
        )
        await self._wait(self.reply_latency)
        return str(resp.choices[0].message.content)

    async def search(self, run: str, queries: list[str]) -> list[str]:
        """A search tool: document ids for the queries (a read; safe to repeat)."""
        await self._wait(self.latency)
        self.ledger.record(run, "tool", "search", at=self.clock.now())
        await self._wait(self.reply_latency)
        return [f"doc-{w}" for q in queries for w in _words(q, 2)]

    async def read(self, run: str, doc_ids: list[str]) -> list[str]:
        """A reader tool: the text of each document (a read; safe to repeat)."""
        await self._wait(self.latency)
        self.ledger.record(run, "tool", "read", at=self.clock.now())
        await self._wait(self.reply_latency)
        return [f"{d}: " + " ".join(_words(d, 5)) for d in doc_ids]

    async def publish(self, run: str, channel: str, content: str, key: str | None) -> int:
        """Publish ``content`` on ``channel``; with a key (and ``honour_keys``) at most once.

        Raises:
            PublishError: ``channel`` is in ``fail_publish``.
        """
        await self._wait(self.latency)
        if channel in self.fail_publish:
            self.ledger.record(run, "publish_refused", channel, at=self.clock.now())
            raise PublishError(f"publishing to {channel!r} is refused (injected failure)")
        post = self.ledger.publish(
            run, channel, content, key if self.honour_keys else None, at=self.clock.now()
        )
        await self._wait(self.reply_latency)
        return post

    async def unpublish(self, run: str, channel: str, post_id: int) -> bool:
        """Take post ``post_id`` down (safe to repeat).

        Raises:
            PublishError: ``channel`` is in ``fail_unpublish``.
        """
        await self._wait(self.latency)
        if channel in self.fail_unpublish:
            self.ledger.record(run, "unpublish_refused", channel, at=self.clock.now())
            raise PublishError(f"taking down post {post_id} on {channel!r} failed (injected)")
        done = self.ledger.unpublish(run, channel, post_id, at=self.clock.now())
        await self._wait(self.reply_latency)
        return done

    def __repr__(self) -> str:
        return f"AgentServices({self.ledger!r}, latency={self.latency}, keys={self.honour_keys})"
