"""How long the history checkers take on long histories (not asserted in any test).

Generates valid concurrent histories the way the property tests do (operations applied one
at a time to a dict at their linearization points, invocations and completions interleaved
around them, a few crashes before or after taking effect recorded as ``info``), then times
``check_register`` and ``check_list_append`` on them, with a seeded ``random.Random``.

    .venv/bin/python benchmarks/bench_checkers.py [--ops 50000] [--processes 10] [--keys 100]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

from surefoot.testing.checkers import check_list_append, check_register
from surefoot.testing.history import History, Op


def simulate(
    n: int,
    processes: int,
    rnd: random.Random,
    new_op: Callable[[], Any],
    apply: Callable[[Any], Any],
) -> list[Op]:
    """``n`` operations by ``processes`` clients; ``new_op()`` makes (f, argument) and
    ``apply(argument)`` runs it on the model, returning (completion type, value)."""
    ops: list[Op] = []
    state: dict[int, tuple[str, str, Any, Any]] = {}
    procs = list(range(processes))
    next_proc, t, started = processes, 0, 0
    while started < n or state:
        slot = rnd.randrange(len(procs))
        p = procs[slot]
        t += 1
        if p not in state:
            if started >= n:
                continue
            f, arg = new_op()
            ops.append(Op("invoke", p, f, arg, t))
            state[p] = ("invoked", f, arg, None)
            started += 1
            continue
        phase, f, arg, result = state[p]
        crash = rnd.random() < 0.01
        if phase == "invoked" and not crash:
            state[p] = ("applied", f, arg, apply(arg))
            continue
        if crash:
            ops.append(Op("info", p, f, arg, t))
            procs[slot], next_proc = next_proc, next_proc + 1
        else:
            ops.append(Op(result[0], p, f, result[1], t))
        del state[p]
    return ops


def register_history(n: int, processes: int, keys: int, rnd: random.Random) -> History:
    model: dict[str, tuple[int, Any]] = {}
    count = 0

    def new_op() -> tuple[str, Any]:
        nonlocal count
        key = f"k{rnd.randrange(keys)}"
        if rnd.random() < 0.5:
            return "read", {"key": key}
        count += 1
        cur = model.get(key, (0, None))[0]
        expect = rnd.choice([None, cur, max(0, cur - 1)])
        return "write", {"key": key, "value": f"v{count}", "expect": expect}

    def apply(arg: dict[str, Any]) -> tuple[str, Any]:
        version, value = model.get(arg["key"], (0, None))
        if "value" not in arg:
            return "ok", {**arg, "version": version, "value": value}
        if arg["expect"] is not None and arg["expect"] != version:
            return "fail", {**arg, "current": version}
        model[arg["key"]] = (version + 1, arg["value"])
        return "ok", {**arg, "version": version + 1}

    return History(simulate(n, processes, rnd, new_op, apply))


def append_history(n: int, processes: int, keys: int, rnd: random.Random) -> History:
    model: dict[str, list[int]] = {}
    element = 0

    def new_op() -> tuple[str, Any]:
        nonlocal element
        mops: list[list[Any]] = []
        for _ in range(rnd.randint(1, 4)):
            key = f"k{rnd.randrange(keys)}"
            if rnd.random() < 0.5:
                element += 1
                mops.append(["append", key, element])
            else:
                mops.append(["r", key, None])
        return "txn", mops

    def apply(mops: list[list[Any]]) -> tuple[str, Any]:
        done = []
        for f, k, v in mops:
            if f == "append":
                model.setdefault(k, []).append(v)
                done.append([f, k, v])
            else:
                done.append([f, k, list(model.get(k, []))])
        return "ok", done

    return History(simulate(n, processes, rnd, new_op, apply))


def timed(what: str, check: Callable[[], Any]) -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    res = check()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    verdict = "valid" if res.valid else "INVALID"
    print(f"{what}: {wall:.2f} s wall, {cpu:.2f} s CPU, {verdict}; {dict(res.stats)}")
    return {"check": what, "wall_s": wall, "cpu_s": cpu, "valid": res.valid, **res.stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=50_000)
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    h = register_history(args.ops, args.processes, args.keys, rnd)
    rows = [timed(f"check_register, {args.ops} ops", lambda: check_register(h))]
    h = append_history(args.ops, args.processes, args.keys, rnd)
    reads = sum(len(m[2]) for o in h if o.type == "ok" for m in o.value if m[0] == "r")
    print(f"list-append history: {args.ops} txns, {reads} elements read in all")
    rows.append(timed(f"check_list_append, {args.ops} txns", lambda: check_list_append(h)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "args": vars(args), "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
