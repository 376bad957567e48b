"""A Jepsen-style campaign on surefoot's Store and Stream: random operations from several
OS processes, recorded as a history, while a nemesis SIGKILLs and SIGSTOPs them and cuts
their connections; then the checkers judge the history and every unknown outcome is resolved
against the final state.

    .venv/bin/python benchmarks/chaos/store_campaign.py --backend sqlite|postgres|redis \
        [--seconds 30] [--workers 4] [--seed 1] [--json report.json]

Operations (each recorded with ``surefoot.testing.history``): register reads, blind writes
and compare-and-set on ``r0..r3``; merges on the append keys ``l0..l3`` (half with an id,
half without); optimistic multi-key transactions appending to ``t0..t2``; snapshot reads of
every list key; stream appends with unique ids, fetches and acks by one consumer group.

Faults: ``kill`` (SIGKILL a worker, start a new one), ``pause`` (SIGSTOP a worker for 0.1 to
1.5 s, then SIGCONT), and on PostgreSQL ``pg-terminate`` (``pg_terminate_backend`` on the
campaign's own backends, found by their ``application_name``), on Redis ``client-kill``
(``CLIENT KILL ID`` for the campaign's own clients, found by their client name). With
``--private-redis always|everysec`` the campaign starts a Redis of its own (append-only file
on, that ``appendfsync``; private_redis.py) and adds ``server-kill``: SIGKILL that server and
start it again from its file. Only the processes the campaign started are signalled, by pid;
only loopback servers are used.

At the end every worker is stopped, a final client reads every key's whole history, the list
keys and the stream, and drains the consumer group. The report: operations, faults,
anomalies per checker (``check_register`` linearizable, ``check_list_append``
strict-serializable, ``check_queue``), and unknown outcomes (``info``) resolved: each
unknown write is found applied once or not applied in the final state (applied twice is an
anomaly). Exit status 1 when anything is anomalous or unresolved.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from final_state import acked_lost, resolve_unknowns

REGISTERS = [f"r{i}" for i in range(4)]
MERGES = [f"l{i}" for i in range(4)]
TXN_LISTS = [f"t{i}" for i in range(3)]
STREAM, GROUP = "events", "g"
PG_URL = os.environ.get("SUREFOOT_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SUREFOOT_REDIS_URL", "redis://127.0.0.1:6379/0")


def campaign_url(backend: str, workdir: Path, tag: str, redis_url: str = REDIS_URL) -> str:
    """The store URL for this run: its own file, schema or key prefix, and a client name
    by which the nemesis finds the campaign's own connections."""
    if backend == "sqlite":
        return f"sqlite:///{workdir / 'store.db'}"
    if backend == "postgres":
        return f"{PG_URL}?schema={tag}&application_name={tag}&reconnect_timeout=10"
    if backend == "redis":
        return f"{redis_url}?prefix={tag}&client_name={tag}&reconnect_timeout=10"
    raise SystemExit(f"unknown backend {backend!r}: sqlite, postgres or redis")


def open_store(url: str) -> Any:
    from surefoot.statebus import Store

    store = Store(url)
    store.declare_merge("l*", "append")
    return store


# -- a worker: random operations until the stop file appears ---------------------------------


class DropExpect:
    """A planted bug (``--plant drop-expect``): writes ignore ``expect`` while the history
    still records it, so racing compare-and-sets overwrite each other; the register
    checker must flag it (the campaign is shown able to fail)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def write(self, key: str, value: Any, *, expect: int | None = None) -> Any:
        return self.store.write(key, value)


def worker(url: str, workdir: Path, index: int, seed: int, plant: str | None) -> None:
    from surefoot.statebus import Stream
    from surefoot.testing.history import (
        Recorder,
        record_ack,
        record_append,
        record_append_txn,
        record_fetch,
        record_list_read,
        record_read,
        record_stream_append,
        record_write,
    )

    pid = os.getpid()
    rnd = random.Random(f"{seed}:{index}:{pid}")
    name = f"w{index}-{pid}"
    stop = workdir / "stop"
    rec = Recorder(workdir / f"hist-{pid}.jsonl", name=name)
    c = rec.client()
    store = stream = consumer = None
    n = 0
    while not stop.exists():
        n += 1
        unique = f"{name}-{n}"
        try:
            if store is None:
                store = open_store(url)
                if plant == "drop-expect":
                    store = DropExpect(store)
                stream = Stream(url, STREAM)
                consumer = stream.consumer(GROUP, visibility_timeout=2.0, max_attempts=1000)
            roll = rnd.random()
            if plant == "drop-expect":  # every worker races compare-and-sets on one key
                roll, keys = 0.2, REGISTERS[:1]
            else:
                keys = REGISTERS
            if roll < 0.15:
                record_read(c, store, rnd.choice(REGISTERS))
            elif roll < 0.30:
                key = rnd.choice(keys)
                seen = record_read(c, store, key).value["version"]
                record_write(c, store, key, unique, expect=seen)
            elif roll < 0.38:
                record_write(c, store, rnd.choice(REGISTERS), unique)
            elif roll < 0.55:
                key = rnd.choice(MERGES)
                record_append(c, store, key, unique, id=unique if rnd.random() < 0.5 else None)
            elif roll < 0.68:
                keys = rnd.sample(TXN_LISTS, rnd.choice((1, 2)))
                record_append_txn(c, store, [(k, unique) for k in keys], reads=keys)
            elif roll < 0.75:
                record_list_read(c, store, [*MERGES, *TXN_LISTS])
            elif roll < 0.88:
                record_stream_append(c, stream, unique, message_id=unique)
            else:
                _, got = record_fetch(c, consumer, 5, worker=name)
                for m in got:
                    record_ack(c, consumer, m)
        except Exception:  # recorded as info (or fail) by the helper; carry on
            time.sleep(rnd.uniform(0.01, 0.1))
    rec.close()


# -- the nemesis -------------------------------------------------------------------------------


class Nemesis:
    """Starts the workers and injects faults into them; signals only its own children."""

    def __init__(
        self, args: argparse.Namespace, url: str, workdir: Path, tag: str, server: Any = None
    ) -> None:
        self.args, self.url, self.workdir, self.tag = args, url, workdir, tag
        self.server = server  # a PrivateRedis this campaign started, or None
        self.rnd = random.Random(args.seed)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.faults: Counter[str] = Counter()
        self.server_kills: list[int] = []  # when each server SIGKILL was sent (monotonic ns)
        self.started = 0

    def spawn(self, index: int) -> None:
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            str(index),
            "--url",
            self.url,
            "--dir",
            str(self.workdir),
            "--seed",
            str(self.args.seed),
            *(["--plant", self.args.plant] if self.args.plant else []),
        ]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs[index] = p
        self.started += 1

    def wait_for_workers(self, timeout: float = 60.0) -> None:
        """Until each worker has recorded an operation (starting Python and opening the
        store take seconds on a loaded machine; a fault before then hits nothing)."""

        def working(pid: int) -> bool:
            f = self.workdir / f"hist-{pid}.jsonl"
            return f.exists() and f.stat().st_size > 0

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(working(p.pid) for p in self.procs.values()):
                return
            time.sleep(0.05)

    def step(self) -> None:
        kinds = ["kill", "pause", "pause"]
        if self.args.backend == "postgres":
            kinds += ["pg-terminate", "pg-terminate"]
        if self.args.backend == "redis":
            kinds += ["client-kill", "client-kill"]
        if self.server is not None:
            kinds += ["server-kill", "server-kill"]
        kind = self.rnd.choice(kinds)
        index = self.rnd.choice(sorted(self.procs))
        p = self.procs[index]
        if kind == "kill":
            p.send_signal(signal.SIGKILL)
            p.wait()
            self.spawn(index)
        elif kind == "pause":
            p.send_signal(signal.SIGSTOP)
            time.sleep(self.rnd.uniform(0.1, 1.5))
            p.send_signal(signal.SIGCONT)
        elif kind == "pg-terminate":
            if not self.pg_terminate():
                return
        elif kind == "client-kill" and not self.redis_client_kill():
            return
        elif kind == "server-kill":  # ours: SIGKILL, down up to 0.5 s, up from its file
            self.server_kills.append(time.monotonic_ns())
            self.server.restart(down=self.rnd.uniform(0, 0.5))
        self.faults[kind] += 1

    def pg_terminate(self) -> int:
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (self.tag,),
            ).fetchall()
        return len(rows)

    def redis_client_kill(self) -> int:
        import redis

        r = redis.Redis.from_url(self.server.url if self.server is not None else REDIS_URL)
        try:
            ids = [c["id"] for c in r.client_list() if c.get("name") == self.tag]
            if ids:
                r.client_kill_filter(_id=self.rnd.choice(ids))
            return len(ids[:1])
        finally:
            r.close()

    def stop_all(self) -> None:
        (self.workdir / "stop").touch()
        for p in self.procs.values():
            p.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 30
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()


# -- the final reads and the verdict -----------------------------------------------------------


def final_reads(url: str, workdir: Path) -> dict[str, Any]:
    """Read everything at the end, recorded in the history too; return the final state."""
    from surefoot.statebus import Stream
    from surefoot.testing.history import (
        Recorder,
        record_ack,
        record_dead_letters,
        record_fetch,
        record_list_read,
        record_read,
    )

    store = open_store(url)
    stream = Stream(url, STREAM)
    consumer = stream.consumer(GROUP, visibility_timeout=2.0, max_attempts=1000)
    rec = Recorder(workdir / "hist-final.jsonl", name="final")
    c = rec.client()
    for key in REGISTERS:
        record_read(c, store, key)
    lists = {k: v for _, k, v in record_list_read(c, store, [*MERGES, *TXN_LISTS]).value}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # drain: what was delivered and not acked comes back
        _, got = record_fetch(c, consumer, 100, worker="final", block=0.5)
        for m in got:
            record_ack(c, consumer, m)
        if not got and consumer.pending == 0:
            break
    record_dead_letters(c, consumer)
    rec.close()
    state = {
        "history": {k: [ch.value for ch in store.history(k)] for k in REGISTERS},
        "lists": lists,
        "stream": [e.message_id for e in stream.read(0, 1_000_000)],
    }
    store.close()
    stream.close()
    return state


def judge(workdir: Path, state: dict[str, Any]) -> dict[str, Any]:
    from surefoot.testing.checkers import check_list_append, check_queue, check_register
    from surefoot.testing.history import History

    history = History.load(*sorted(workdir.glob("hist-*.jsonl")))
    results = {
        "register": check_register(history),
        "list-append": check_list_append(history, model="strict-serializable"),
        "queue": check_queue(history),
    }
    pairs = history.pairs()
    return {
        "operations": len(pairs),
        "by_type": dict(Counter(p.type for p in pairs)),
        "by_f": dict(Counter(p.f for p in pairs)),
        "anomalies": {k: r.kinds() for k, r in results.items()},
        "reports": {k: r.report() for k, r in results.items() if not r.valid},
        "unknown": resolve_unknowns(history, state),
        "history": history,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="sqlite")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.5, help="seconds between faults")
    ap.add_argument("--json", help="write the report here too")
    ap.add_argument("--keep", help="copy the histories (hist-*.jsonl) into this folder")
    ap.add_argument("--plant", choices=["drop-expect"], help="plant a bug the checks must find")
    ap.add_argument(
        "--private-redis",
        choices=["always", "everysec", "off"],
        help="start a Redis of the campaign's own (AOF, this appendfsync) and SIGKILL and "
        "restart it as a fault (only with --backend redis); off: no AOF, a planted fault",
    )
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # A SIGTERM (make's, timeout's) ends the run through its finally blocks, so the
    # processes it started are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.worker is not None:
        worker(args.url, Path(args.dir), args.worker, args.seed, args.plant)
        return 0

    if args.private_redis and args.backend != "redis":
        raise SystemExit("--private-redis needs --backend redis")
    tag = f"sfchaos_{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="sf-chaos-") as tmp:
        workdir = Path(tmp)
        server = None
        if args.private_redis:
            from private_redis import PrivateRedis

            server = PrivateRedis(workdir / "redis", args.private_redis)
        try:
            url = campaign_url(args.backend, workdir, tag, server.url if server else REDIS_URL)
            open_store(url).close()  # tables made once, before the workers race
            nemesis = Nemesis(args, url, workdir, tag, server)
            for i in range(args.workers):
                nemesis.spawn(i)
            try:
                nemesis.wait_for_workers()  # faults start once every worker is working
                began, began_ns = time.monotonic(), time.monotonic_ns()
                time.sleep(min(1.0, args.seconds / 4))
                while time.monotonic() - began < args.seconds:
                    nemesis.step()
                    time.sleep(nemesis.rnd.uniform(0.5, 1.5) * args.interval)
            finally:
                nemesis.stop_all()
            try:
                state, final_error = final_reads(url, workdir), None
            except Exception as exc:  # e.g. a server that lost its data: nothing to read
                final_error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
                state = {"history": {k: [] for k in REGISTERS}, "stream": []}
                state["lists"] = {k: [] for k in [*MERGES, *TXN_LISTS]}
            verdict = judge(workdir, state)
            verdict["final_error"] = final_error
            verdict["acked_lost"] = acked_lost(verdict.pop("history"), state, nemesis.server_kills)
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                for f in workdir.glob("hist-*.jsonl"):
                    shutil.copy(f, args.keep)
            try:
                cleanup(args.backend, url)
            except Exception as exc:
                print(f"cleanup failed: {type(exc).__name__}: {exc}"[:300])
        finally:
            if server is not None:
                server.close()
    # An acknowledged write missing at the end is one anomaly more (the checkers flag it
    # too, as a stale read or a lost element; counted here also when no read saw it).
    anomalies = sum(sum(k.values()) for k in verdict["anomalies"].values())
    anomalies += verdict["acked_lost"]["count"] + (verdict["final_error"] is not None)
    twice = verdict["unknown"]["applied-twice-or-torn"]
    report = {
        "backend": args.backend,
        "seconds": args.seconds,
        "workers": args.workers,
        "seed": args.seed,
        "private_redis": args.private_redis,
        "server_kills_s": [round((k - began_ns) / 1e9, 2) for k in nemesis.server_kills],
        "processes_started": nemesis.started,
        "faults": dict(nemesis.faults),
        **verdict,
        "anomalies_total": anomalies + len(twice),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": os.getloadavg(),
    }
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 1 if report["anomalies_total"] else 0


def cleanup(backend: str, url: str) -> None:
    from surefoot import storage

    if backend == "sqlite":
        return
    st: Any = storage.open(url)
    try:
        if backend == "postgres":
            st.db.drop_schema()
        else:
            st.db.delete_prefix()
    finally:
        st.close()


def print_report(r: dict[str, Any]) -> None:
    u = r["unknown"]
    print(f"== store campaign on {r['backend']}: {r['seconds']:.0f} s, {r['workers']} workers")
    print(f"operations:       {r['operations']} {r['by_f']}")
    print(f"outcomes:         {r['by_type']}")
    print(f"faults injected:  {sum(r['faults'].values())} {r['faults']}")
    print(f"anomalies found:  {r['anomalies_total']} {r['anomalies']}")
    twice = u["applied-twice-or-torn"]
    print(f"unknown outcomes: {u['resolved']} (applied twice or torn: {twice})")
    if r["final_error"]:
        print(f"final reads FAILED: {r['final_error']}")
    lost = r["acked_lost"]
    print(f"acknowledged writes lost: {lost['count']} {lost['examples']}")
    if r["private_redis"]:
        print(
            f"private Redis: appendfsync {r['private_redis']}, SIGKILLed and restarted "
            f"{r['faults'].get('server-kill', 0)} times"
        )
    for name, text in r["reports"].items():
        print(f"-- {name}\n{text}")
    print(f"date {r['date']}, load average {r['load'][0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
