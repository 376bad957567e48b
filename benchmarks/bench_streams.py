"""Durable token streams: tokens/s a reader gets through the run's stream against reading the
provider's stream directly, commits per 1,000 tokens, and the latency from the provider's
token to the reader, on SQLite and PostgreSQL.

The provider is surefoot's ``FakeProvider`` pacing its streamed reply at ``--rate`` tokens/s
(one word a token), read through the real OpenAI SDK by ``surefoot.llm``'s adapter:

* ``direct``: ``client.stream(...)`` iterated in this thread; the reader is the loop itself.
* ``durable``: the same call inside a durable step (``on_text=durable.emit``) in this
  process, and a reader in another process following ``handle.stream()``: the worker and
  the reader share nothing but the database.

The provider runs in a process of its own (as a remote model would), so its pacing does not
compete with the worker for this process's interpreter lock.

Tokens/s is tokens over the time from the request to the reader's last token (so the last
batch's delay counts against the durable stream); the ratio is
durable over direct, per round (the two run one after the other, in alternating order), and
its median is compared with the target (>= 0.9x).
Latency is, per token, the reader's receipt minus the adapter's receipt of the same token
(stamped in ``on_text`` before ``emit``), both on ``time.monotonic()`` (one clock for every
process of the machine); median and p99 over every token of every round.
Commits per 1,000 tokens are counted by the app (``app.tokens.commits``: one per batch) and
checked against the batching rule's bound: a batch is written when it holds ``max_events``
events or its oldest is ``max_delay`` seconds old, so at ``rate`` tokens/s no batch but an
attempt's last holds fewer than ``min(max_events, rate * max_delay)`` tokens.

Usage: ``.venv/bin/python benchmarks/bench_streams.py [--rate 1000] [--tokens 3000]
[--rounds 5] [--backends sqlite,postgresql] [--pg URL] [--json out.json]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from surefoot import durable, llm, storage

PG = os.environ.get("SUREFOOT_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _text(tokens: int) -> str:
    return " ".join(f"t{i}" for i in range(tokens))


def direct(url: str, tokens: int) -> dict[str, float]:
    """One streamed reply read here, straight from the provider."""
    client = llm.connect("openai", "bench-model", api_key="bench", base_url=url)
    try:
        t0 = time.monotonic()
        n = 0
        for _ in client.stream(messages=[{"role": "user", "content": "go"}]):
            n += 1
        t1 = time.monotonic()
    finally:
        client.close()
    assert n == tokens, (n, tokens)
    return {"tokens_per_s": n / (t1 - t0)}


READER = """
import json, sys, time
from surefoot import durable
app = durable.App(sys.argv[1], poll=0.05, create=False)
print("ready", flush=True)
run_id = sys.stdin.readline().strip()
while True:
    try:
        stream = app.handle(run_id).stream()
        break
    except Exception:
        time.sleep(0.001)
got = [time.monotonic() for ev in stream if ev.kind == "token"]
print(json.dumps(got), flush=True)
app.close()
"""

PROVIDER = """
import sys
from surefoot.testing import FakeProvider
n = int(sys.argv[2])
with FakeProvider(tokens_per_second=float(sys.argv[1])) as fp:
    fp.responder = lambda api, msgs: " ".join(f"t{i}" for i in range(n))
    print(fp.openai_url, flush=True)
    sys.stdin.read()  # until the bench closes it
"""


def durable_round(
    db: str, url: str, tokens: int, batching: durable.Batching
) -> tuple[dict[str, float], list[float]]:
    """One streamed reply through a durable step here, read by another process."""
    stamps: list[float] = []

    def on_text(piece: str) -> None:
        stamps.append(time.monotonic())
        durable.emit(piece)

    client = llm.connect("openai", "bench-model", api_key="bench", base_url=url, on_text=on_text)
    worker = durable.App(db, poll=0.05, stream_batching=batching)
    assert worker.journal is not None  # the reader opens an existing journal
    run_id = f"bench-{uuid.uuid4().hex[:8]}"

    @worker.step
    def ask() -> str:
        return client.stream(messages=[{"role": "user", "content": "go"}]).read().text

    @worker.workflow
    def wf() -> str:
        return ask()

    reader = subprocess.Popen(
        [sys.executable, "-c", READER, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None
        assert reader.stdin is not None
        assert reader.stdout.readline().strip() == "ready"
        t0 = time.monotonic()
        h = worker.start(wf, run_id=run_id)
        reader.stdin.write(run_id + "\n")
        reader.stdin.flush()
        h.result(timeout=120)
        got = json.loads(reader.stdout.readline())
        commits = worker.tokens.commits
    finally:
        reader.kill() if reader.poll() is None else None
        reader.wait()
        client.close()
        worker.close()
    assert len(got) == len(stamps) == tokens, (len(got), len(stamps), tokens)
    lat = [g - s for g, s in zip(got, stamps, strict=True)]
    out = {"tokens_per_s": tokens / (got[-1] - t0), "commits": commits}
    out["worker_tokens_per_s"] = tokens / (stamps[-1] - t0)  # what the step itself got
    return out, lat


def _db(kind: str, tmp: str, pg: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp}/bench-{uuid.uuid4().hex[:8]}.db"
    return f"{pg}?schema=sf_bench_{uuid.uuid4().hex[:10]}"


def _drop(db: str) -> None:
    if db.startswith("postgresql"):
        st: Any = storage.open(db)
        st.db.drop_schema()
        st.close()


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=1000.0, help="provider tokens/s")
    ap.add_argument("--tokens", type=int, default=3000, help="tokens per reply")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--pg", default=PG)
    ap.add_argument("--max-events", type=int, default=64)
    ap.add_argument("--max-delay", type=float, default=0.05)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    batching = durable.Batching(args.max_events, args.max_delay)
    started = dt.datetime.now(dt.UTC)
    load = os.getloadavg()
    print(f"bench_streams {started:%Y-%m-%d %H:%M:%S} UTC, load {load[0]:.2f} {load[1]:.2f}")
    print(
        f"FakeProvider at {args.rate:,.0f} tokens/s, {args.tokens:,} tokens a reply, "
        f"{args.rounds} rounds; batching: {args.max_events} events or {args.max_delay} s"
    )
    per_batch = min(args.max_events, args.rate * args.max_delay)
    bound = 1000 / per_batch + 1000 / args.tokens  # plus one end-of-attempt batch per reply
    results: dict[str, Any] = {}
    verdicts: list[bool] = []
    provider = subprocess.Popen(
        [sys.executable, "-c", PROVIDER, str(args.rate), str(args.tokens)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert provider.stdout is not None
    assert provider.stdin is not None
    url = provider.stdout.readline().strip()
    with provider, tempfile.TemporaryDirectory() as tmp:
        for kind in [b for b in args.backends.split(",") if b]:
            ratios, lats, commits, d_rates, s_rates, w_rates = [], [], [], [], [], []
            for r in range(args.rounds):
                db = _db(kind, tmp, args.pg)
                try:
                    if r % 2:  # the order alternates: a load burst hits either side alike
                        s, lat = durable_round(db, url, args.tokens, batching)
                        d = direct(url, args.tokens)
                    else:
                        d = direct(url, args.tokens)
                        s, lat = durable_round(db, url, args.tokens, batching)
                finally:
                    _drop(db)
                d_rates.append(d["tokens_per_s"])
                s_rates.append(s["tokens_per_s"])
                w_rates.append(s["worker_tokens_per_s"])
                ratios.append(s["tokens_per_s"] / d["tokens_per_s"])
                commits.append(s["commits"] / args.tokens * 1000)
                lats += lat
            ratio = statistics.median(ratios)
            per_k = statistics.median(commits)
            med, p99 = statistics.median(lats) * 1000, pct(lats, 99) * 1000
            ok_rate, ok_commits = ratio >= 0.9, per_k <= bound
            verdicts += [ok_rate, ok_commits]
            results[kind] = {
                "direct_tokens_per_s": statistics.median(d_rates),
                "durable_tokens_per_s": statistics.median(s_rates),
                "worker_tokens_per_s": statistics.median(w_rates),
                "ratio": ratio,
                "ratios": ratios,
                "commits_per_1000_tokens": per_k,
                "commits_bound": bound,
                "latency_ms_median": med,
                "latency_ms_p99": p99,
            }
            print(f"\n{kind}")
            print(
                f"  tokens/s  direct {statistics.median(d_rates):,.0f}  durable "
                f"{statistics.median(s_rates):,.0f}  ratio {ratio:.3f}x "
                f"(rounds {', '.join(f'{r:.3f}' for r in ratios)})  target >= 0.9x: "
                f"{'PASS' if ok_rate else 'MISS'}"
            )
            print(
                f"  (the durable step itself received {statistics.median(w_rates):,.0f} tokens/s)"
            )
            print(
                f"  commits per 1,000 tokens {per_k:.1f}  bound {bound:.1f} "
                f"(one per batch of >= {per_batch:.0f}): {'PASS' if ok_commits else 'MISS'}"
            )
            print(f"  latency provider token -> reader: median {med:.1f} ms, p99 {p99:.1f} ms")
        provider.stdin.close()
    end_load = os.getloadavg()
    print(f"\nload at the end {end_load[0]:.2f} {end_load[1]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"started": started.isoformat(), "load": load, "args": vars(args), **results},
                f,
                indent=2,
            )
    print("all targets PASS" if all(verdicts) else "some targets MISS")


if __name__ == "__main__":
    main()
