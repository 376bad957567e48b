"""Retry and breaker overhead per call: surefoot vs bare, hand-written, tenacity, stamina,
backoff and pybreaker, in one process with interleaved blocks.

* success path: the function returns at once; ns per call and the overhead over a bare call;
* fails-twice path: the function fails twice then succeeds (3 attempts), zero wait
  configured in every library; ns per logical call;
* breakers: surefoot vs pybreaker per call (closed), and 8 threads x 20 calls of a 5 ms
  function: wall time vs no breaker (pybreaker holds its lock during the call).

Each round runs every case once, in turn, so drift on a noisy machine hits all cases alike;
the median round is reported. Usage:

    .venv/bin/python benchmarks/bench_retry.py [--rounds 7] [--n 100000] [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import backoff
import pybreaker
import stamina
import tenacity

from surefoot.resilience import Backoff, CircuitBreaker, RetryPolicy, retry, retry_call

# The peers' figures measured on this machine (research/peers-measured.md §5), for reference.
PEERS_MEASURED = {
    "success": {"tenacity": 12_748, "stamina": 11_490, "backoff": 2_382, "pybreaker": 1_421},
    "fails_twice": {"tenacity": 202_541, "stamina": 218_728, "backoff": 210_500},
}


def ok() -> int:
    return 1


def hand_written(fn: Callable[[], int]) -> Callable[[], int]:
    """A plain 3-attempt retry decorator, the floor any library is compared with."""

    @functools.wraps(fn)
    def wrapper() -> int:
        for attempt in range(3):
            try:
                return fn()
            except ValueError:
                if attempt == 2:
                    raise
        raise AssertionError

    return wrapper


def fails_twice() -> Callable[[], int]:
    """A function that fails with ValueError twice, then succeeds, forever in that cycle."""
    state = [0]

    def f() -> int:
        state[0] += 1
        if state[0] % 3:
            raise ValueError("transient")
        return 1

    return f


def loop(fn: Callable[[], Any], n: int) -> float:
    """ns per call of ``fn`` over ``n`` calls."""
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def success_cases() -> dict[str, Callable[[], Any]]:
    policy = RetryPolicy(max_attempts=3, retry_on=ValueError)
    sf_breaker = CircuitBreaker("bench")
    py_breaker = pybreaker.CircuitBreaker()
    return {
        "bare function": ok,
        "hand-written 3-attempt decorator": hand_written(ok),
        "surefoot retry_call": lambda: retry_call(ok, policy=policy),
        "surefoot @retry": retry(policy)(ok),
        "tenacity": tenacity.retry(stop=tenacity.stop_after_attempt(3))(ok),
        "stamina": stamina.retry(on=ValueError, attempts=3)(ok),
        "backoff": backoff.on_exception(backoff.expo, ValueError, max_tries=3)(ok),
        "surefoot CircuitBreaker": sf_breaker(ok),
        "pybreaker": py_breaker(ok),
    }


def failure_cases() -> dict[str, Callable[[], Any]]:
    policy = RetryPolicy(max_attempts=3, backoff=Backoff(0, 0, "none"), retry_on=ValueError)
    return {
        "hand-written 3-attempt loop": hand_written(fails_twice()),
        "surefoot @retry (zero wait)": retry(policy)(fails_twice()),
        "tenacity (wait_none)": tenacity.retry(
            stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_none()
        )(fails_twice()),
        "stamina (wait 0)": stamina.retry(
            on=ValueError, attempts=3, wait_initial=0, wait_max=0, wait_jitter=0
        )(fails_twice()),
        "backoff (constant, interval 0)": backoff.on_exception(
            backoff.constant, ValueError, max_tries=3, interval=0, jitter=None
        )(fails_twice()),
    }


def run_blocks(cases: dict[str, Callable[[], Any]], n: int, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():  # warm up
        loop(fn, max(1, n // 20))
    for _ in range(rounds):
        for name, fn in cases.items():
            out[name].append(loop(fn, n))
    return out


def threaded(
    call: Callable[[Callable[[], None]], None], threads: int = 8, calls: int = 20
) -> float:
    """Wall seconds for ``threads`` threads each making ``calls`` calls of a 5 ms function."""

    def work() -> None:
        time.sleep(0.005)

    def body() -> None:
        for _ in range(calls):
            call(work)

    ts = [threading.Thread(target=body) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def breaker_threads(rounds: int) -> dict[str, list[float]]:
    sf = CircuitBreaker("threads")
    pb = pybreaker.CircuitBreaker()
    cases: dict[str, Callable[[Callable[[], None]], None]] = {
        "no breaker": lambda f: f(),
        "surefoot CircuitBreaker": lambda f: sf.call(f),
        "pybreaker": lambda f: pb.call(f),
    }
    out: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        for name, c in cases.items():
            out[name].append(threaded(c))
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=100_000, help="calls per block, success path")
    ap.add_argument("--n-fail", type=int, default=5_000, help="logical calls per block, failures")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    stamina.instrumentation.set_on_retry_hooks([])  # measure the retry logic, not logging

    report: dict[str, Any] = {"rounds": args.rounds}
    s = run_blocks(success_cases(), args.n, args.rounds)
    bare = med(s["bare function"])
    print(f"\nSuccess path: {args.n:,} calls per block, median of {args.rounds} blocks")
    print(f"{'case':38} {'ns/call':>9} {'overhead ns':>12} {'x bare':>8} {'peer (doc)':>11}")
    rows = []
    for name, xs in s.items():
        m = med(xs)
        peer = next((v for k, v in PEERS_MEASURED["success"].items() if name.startswith(k)), None)
        print(
            f"{name:38} {m:9,.0f} {m - bare:12,.0f} {m / bare:8.1f} "
            f"{f'{peer:,}' if peer else '':>11}"
        )
        rows.append({"case": name, "ns_per_call": m, "overhead_ns": m - bare, "x_bare": m / bare})
    report["success"] = rows

    f = run_blocks(failure_cases(), args.n_fail, args.rounds)
    hand = med(f["hand-written 3-attempt loop"])
    print(f"\nFails twice, then succeeds (zero wait): {args.n_fail:,} logical calls per block")
    print(f"{'case':38} {'ns/call':>9} {'x hand-written':>15} {'peer (doc)':>11}")
    rows = []
    for name, xs in f.items():
        m = med(xs)
        peer = next(
            (v for k, v in PEERS_MEASURED["fails_twice"].items() if name.startswith(k)), None
        )
        print(f"{name:38} {m:9,.0f} {m / hand:15.1f} {f'{peer:,}' if peer else '':>11}")
        rows.append({"case": name, "ns_per_call": m, "x_hand_written": m / hand})
    report["fails_twice"] = rows

    b = breaker_threads(max(3, args.rounds // 2))
    base = med(b["no breaker"])
    print("\nBreakers, 8 threads x 20 calls of a 5 ms function: wall time")
    print(f"{'case':38} {'wall ms':>9} {'x no breaker':>13}")
    rows = []
    for name, xs in b.items():
        m = med(xs)
        print(f"{name:38} {m * 1000:9.1f} {m / base:13.2f}")
        rows.append({"case": name, "wall_s": m, "x_no_breaker": m / base})
    report["threads"] = rows

    by = {r["case"]: r for r in report["success"]}
    fails = {r["case"]: r for r in report["fails_twice"]}
    thr = {r["case"]: r for r in report["threads"]}
    targets = {
        "success overhead <= 1.5 us (retry_call)": by["surefoot retry_call"]["overhead_ns"] <= 1500,
        "success overhead <= 1.5 us (@retry)": by["surefoot @retry"]["overhead_ns"] <= 1500,
        "fails-twice <= 10 us": fails["surefoot @retry (zero wait)"]["ns_per_call"] <= 10_000,
        "8-thread breaker <= 1.2x no breaker": thr["surefoot CircuitBreaker"]["x_no_breaker"]
        <= 1.2,
    }
    print("\nTargets:")
    for k, v in targets.items():
        print(f"  {'met ' if v else 'MISSED'} {k}")
    report["targets"] = targets
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
