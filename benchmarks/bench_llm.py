"""The provider adapters' overhead per call over a bare SDK call, against the local FakeProvider.

Side by side in one process and one run; each turn calls every case once and times each
call alone, and the per-call medians are compared (load bursts on a shared machine hit every
case alike and the median ignores them):

* ``sdk``: ``openai.OpenAI(max_retries=0).chat.completions.create(...)`` (the bare call);
* ``sdk_raw``: the same through ``with_raw_response`` (what the adapter calls, for headers);
* ``adapter``: ``surefoot.llm.connect("openai", ...).create(...)`` with its default policy;
* ``adapter_full``: the same with a breaker, a rate limiter (limits far above the rate),
  a price table and a JSON-schema check;
* the Anthropic pair (``anthropic_sdk``, ``anthropic_adapter``).

Also the adapter's machinery alone (no network: the SDK call replaced by a function that
returns a ready reply), which is the overhead without the loopback noise.

Usage: ``.venv/bin/python benchmarks/bench_llm.py [--rounds 7] [--n 200] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import anthropic
import openai

from surefoot.llm import (
    ChatCompletion,
    Choice,
    Message,
    Price,
    PriceTable,
    RateLimiter,
    Usage,
    connect,
)
from surefoot.resilience import CircuitBreaker
from surefoot.testing import FakeProvider

MSGS = [{"role": "user", "content": "say ok"}]


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=200, help="calls per case per round")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()

    with FakeProvider() as fp:
        fp.responder = lambda api, msgs: '{"ok": true}'
        sdk = openai.OpenAI(base_url=fp.openai_url, api_key="bench", max_retries=0)
        ant = anthropic.Anthropic(base_url=fp.anthropic_url, api_key="bench", max_retries=0)
        # the adapters wrap the very same SDK clients (same connection pool), so the only
        # difference between the cases is the adapter
        adapter = connect("openai", "bench-model", client=sdk)
        full = connect(
            "openai",
            "bench-model",
            client=sdk,
            breaker=CircuitBreaker(failure_threshold=5, reset_timeout=30),
            limiter=RateLimiter(requests_per_minute=10_000_000, tokens_per_minute=1e12),
            prices=PriceTable({"bench-": Price(1, 2)}),
        )
        schema = {"type": "object", "required": ["ok"]}
        a_adapter = connect("anthropic", "bench-model", client=ant, max_tokens=64)
        cases: dict[str, Callable[[], Any]] = {
            "sdk": lambda: sdk.chat.completions.create(model="bench-model", messages=MSGS),
            "sdk_raw": lambda: sdk.chat.completions.with_raw_response.create(
                model="bench-model", messages=MSGS
            ).parse(),
            "adapter": lambda: adapter.create(messages=MSGS),
            "adapter_full": lambda: full.create(messages=MSGS, schema=schema),
            "anthropic_sdk": lambda: ant.messages.create(
                model="bench-model", max_tokens=64, messages=MSGS
            ),
            "anthropic_adapter": lambda: a_adapter.create(messages=MSGS),
        }
        for fn in cases.values():  # warm up connections and caches
            for _ in range(20):
                fn()
        # every case once per turn, each call timed alone: load bursts hit all cases alike
        # and the per-call median ignores them
        rounds: dict[str, list[float]] = {k: [] for k in cases}
        clock = time.perf_counter
        order = list(cases.items())
        for turn in range(args.rounds * args.n):
            k = turn % len(order)  # rotate, so no case always runs right after the same one
            for name, fn in order[k:] + order[:k]:
                t0 = clock()
                fn()
                rounds[name].append((clock() - t0) * 1e6)
        requests = fp.count()

    # the machinery alone: the SDK call replaced by a ready reply
    ready = ChatCompletion(
        "id", "bench-model", [Choice(0, Message("assistant", '{"ok": true}'))], Usage(5, 3, 8)
    )
    offline = connect("openai", "bench-model", api_key="bench", base_url="http://127.0.0.1:9/v1")
    offline._send = lambda req, timeout: (ready, None)  # type: ignore[method-assign]
    bare = lambda: ready  # noqa: E731
    offline_full = connect(
        "openai",
        "bench-model",
        api_key="bench",
        base_url="http://127.0.0.1:9/v1",
        breaker=CircuitBreaker(failure_threshold=5, reset_timeout=30),
        limiter=RateLimiter(requests_per_minute=10_000_000, tokens_per_minute=1e12),
        prices=PriceTable({"bench-": Price(1, 2)}),
    )
    offline_full._send = lambda req, timeout: (ready, None)  # type: ignore[method-assign]
    machinery: dict[str, list[float]] = {
        "bare_function": [],
        "adapter_machinery": [],
        "adapter_full_machinery": [],
    }
    for _ in range(args.rounds):
        machinery["bare_function"].append(per_call_us(bare, 20_000))
        machinery["adapter_machinery"].append(
            per_call_us(lambda: offline.create(messages=MSGS), 20_000)
        )
        machinery["adapter_full_machinery"].append(
            per_call_us(lambda: offline_full.create(messages=MSGS, schema=schema), 20_000)
        )

    med = {k: statistics.median(v) for k, v in {**rounds, **machinery}.items()}
    rtt = med["sdk"]
    print(
        f"FakeProvider on loopback, {args.rounds * args.n} turns, {requests} requests; "
        "median us per call"
    )
    print(f"{'case':<20}{'us/call':>10}{'vs sdk':>10}{'overhead':>12}")
    for name in cases:
        base = med["anthropic_sdk"] if name.startswith("anthropic") else rtt
        over = med[name] - base
        print(f"{name:<20}{med[name]:>10.1f}{med[name] / base:>10.3f}{over:>+11.1f}u")
    for name in ("adapter_machinery", "adapter_full_machinery"):
        mach = med[name] - med["bare_function"]
        print(
            f"{name} (no network): {mach:.1f} us per call "
            f"= {mach / rtt:.1%} of a bare SDK loopback round trip ({rtt:.0f} us)"
        )
    for name, base in (
        ("adapter", "sdk"),
        ("adapter_full", "sdk"),
        ("anthropic_adapter", "anthropic_sdk"),
    ):
        share = (med[name] - med[base]) / med[base]
        verdict = "meets" if share < 0.05 else "MISSES"
        print(f"{name}: {share:+.1%} over {base} (target < 5%): {verdict}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"median_us": med, "rounds": {**rounds, **machinery}}, f, indent=2)


if __name__ == "__main__":
    main()
