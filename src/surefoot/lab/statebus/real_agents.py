"""Seed 000, Hard 1: three real agent processes on a JSON file, a Store key and a Stream.

``run_real_agents`` starts ``agents`` OS processes (each runs :func:`agent_process`) that
each add ``items`` findings, in one of three modes:

* ``json``: one shared JSON file, plain read-modify-write (read, think, write back);
* ``store``: a versioned ``Store`` key; the write carries the version read, a conflict makes
  the agent re-read, re-think (a new model call) and retry;
* ``stream``: a ``Stream``; each finding is appended with a message id and
  ``expect_last_seq`` (the version check), and every agent finally retries one append with
  the same id to show it is deduplicated.

"Thinking" is a FakeLLM call plus a seeded real sleep standing in for model latency, so the
processes overlap the way agents waiting on a model do. The processes wait on a file
barrier so they start together. The ``statebus.real-agents`` experiment runs the three
modes and sets them beside the tick simulator's prediction.

Hard 2 (resolvers) and Hard 3 (injection) are in ``resolvers`` and ``injection``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError, ConflictError
from .._registry import LabContext, LabResult, Table, experiment
from . import shared
from ._common import SEED_FILE, compare, rounded

__all__ = ["MODES", "RealAgentsReport", "agent_process", "real_agents", "run_real_agents"]

MODES = ("json", "store", "stream")


@dataclass(frozen=True, slots=True)
class RealAgentsReport:
    """What one mode did with real processes.

    Attributes:
        produced: findings the agents set out to add. kept: distinct findings at the end.
        lost: produced − kept. retries: writes redone after a version conflict.
        model_calls: FakeLLM calls made in all processes. dedup_hits: retried appends the
            stream recognised as duplicates (``stream`` mode).
    """

    mode: str
    agents: int
    produced: int
    kept: int
    lost: int
    retries: int
    model_calls: int
    dedup_hits: int
    seconds: float
    per_agent: list[dict[str, Any]] = field(default_factory=list)


def _think(
    llm: Any, rng: random.Random, agent: str, i: int, n: int, think: tuple[float, float]
) -> str:
    prompt = f"agent {agent}: finding {i}; the list has {n} entries"
    text: str = (
        llm.create(model="fake-1", messages=[{"role": "user", "content": prompt}])
        .choices[0]
        .message.content
    )
    time.sleep(rng.uniform(*think))
    return text[:40]


def _barrier(folder: Path, agent: str, agents: int, limit: float = 20.0) -> None:
    (folder / f"ready-{agent}").touch()
    deadline = time.monotonic() + limit
    while len(list(folder.glob("ready-*"))) < agents and time.monotonic() < deadline:
        time.sleep(0.001)


def agent_process(cfg: dict[str, Any]) -> dict[str, Any]:
    """One agent's run in its own process: add ``cfg["items"]`` findings; return its counts."""
    from ...llm import FakeLLM

    agent, mode, items = cfg["agent"], cfg["mode"], cfg["items"]
    think = (cfg["think"][0], cfg["think"][1])
    rng = random.Random(f"{cfg['seed']}:{agent}")
    llm = FakeLLM(seed=cfg["seed"])
    retries = dedup = 0
    if mode == "store":
        from ...statebus import Store

        st = Store(cfg["url"], namespace=cfg["name"])
        st.register_agent(agent)
        s = st.session(agent)
    elif mode == "stream":
        from ...statebus import Stream

        stream = Stream(cfg["url"], cfg["name"])
    _barrier(Path(cfg["barrier"]), agent, cfg["agents"])
    i = 0
    while i < items:
        if mode == "json":
            path = Path(cfg["path"])
            base = json.loads(path.read_text())
            text = _think(llm, rng, agent, i, len(base), think)
            tmp = path.with_name(f".{agent}.tmp")
            tmp.write_text(json.dumps([*base, {"agent": agent, "i": i, "text": text}]))
            os.replace(tmp, path)  # atomic file swap: no torn file, but still a lost update
        elif mode == "store":
            e = s.read("findings")
            base = list(e.value) if e is not None else []
            text = _think(llm, rng, agent, i, len(base), think)
            try:
                s.write(
                    "findings",
                    [*base, {"agent": agent, "i": i, "text": text}],
                    expect=e.version if e else 0,
                )
            except ConflictError:
                retries += 1
                continue
        else:
            last = stream.last_seq
            text = _think(llm, rng, agent, i, last, think)
            try:
                stream.append(
                    {"agent": agent, "i": i, "text": text},
                    message_id=f"{agent}-{i}",
                    expect_last_seq=last,
                )
            except ConflictError:
                retries += 1
                continue
        i += 1
    if mode == "stream" and items:
        # A retry of the last append (as after a lost reply): same id, same payload.
        old = stream.read(after=0, limit=1_000_000)
        mine = next(m for m in old if m.message_id == f"{agent}-{items - 1}")
        if stream.append(mine.payload, message_id=mine.message_id).duplicate:
            dedup += 1
    return {"agent": agent, "retries": retries, "model_calls": llm.calls, "dedup_hits": dedup}


# Not ``python -m`` on this module: that would import it twice (as the package's submodule
# and as ``__main__``) and register the experiment twice.
_AGENT_MAIN = (
    "import json, sys; from surefoot.lab.statebus.real_agents import agent_process; "
    "print(json.dumps(agent_process(json.loads(sys.argv[1]))))"
)


def run_real_agents(
    mode: str,
    workdir: str | Path,
    *,
    url: str | None = None,
    agents: int = 3,
    items: int = 10,
    think: tuple[float, float] = (0.002, 0.01),
    seed: int = 0,
    timeout: float = 120.0,
) -> RealAgentsReport:
    """Run ``agents`` real processes adding ``items`` findings each; count what survived.

    Args:
        mode: ``json``, ``store`` or ``stream``.
        workdir: a folder for the JSON file, the barrier and the default SQLite file.
        url: the storage for ``store``/``stream`` (a SQLite file in ``workdir`` by default;
            ``postgresql://`` or ``redis://`` when those backends exist). ``memory://`` is
            refused: separate processes cannot share it.
        think: seconds of emulated model latency per call (uniform range).

    Raises:
        ConfigError: unknown mode, a ``memory://`` URL, or bad sizes.
        RuntimeError: an agent process failed or ran past ``timeout`` (it is killed).
    """
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    if agents < 1 or items < 0:
        raise ConfigError(f"agents must be >= 1 and items >= 0, got {agents!r} and {items!r}")
    if url is not None and url.startswith("memory:"):
        raise ConfigError(
            f"{url!r} lives inside one process; real agent processes need a shared store "
            "such as sqlite:///team.db"
        )
    work = Path(workdir) / f"real-{mode}-{seed}-{time.monotonic_ns()}"
    work.mkdir(parents=True)
    barrier = work / "barrier"
    barrier.mkdir()
    path = work / "findings.json"
    path.write_text("[]")
    url = url or f"sqlite:///{work / 'team.db'}"
    name = f"findings-{work.name}"
    procs: list[subprocess.Popen[str]] = []
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        for a in range(agents):
            cfg = {
                "agent": f"a{a}",
                "mode": mode,
                "items": items,
                "think": list(think),
                "seed": seed,
                "url": url,
                "name": name,
                "path": str(path),
                "barrier": str(barrier),
                "agents": agents,
            }
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _AGENT_MAIN, json.dumps(cfg)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
        results = []
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(f"agent process {p.pid} failed ({p.returncode}): {err[-2000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    seconds = time.perf_counter() - started
    if mode == "json":
        final = json.loads(path.read_text())
    elif mode == "store":
        from ...statebus import Store

        st = Store(url, namespace=name)
        e = st.read("findings")
        final = list(e.value) if e is not None else []
        st.close()
    else:
        from ...statebus import Stream

        stream = Stream(url, name)
        final = [m.payload for m in stream.read(after=0, limit=1_000_000)]
        stream.close()
    kept = len({(f["agent"], f["i"]) for f in final})
    produced = agents * items
    return RealAgentsReport(
        mode=mode,
        agents=agents,
        produced=produced,
        kept=kept,
        lost=produced - kept,
        retries=sum(r["retries"] for r in results),
        model_calls=sum(r["model_calls"] for r in results),
        dedup_hits=sum(r["dedup_hits"] for r in results),
        seconds=seconds,
        per_agent=results,
    )


@experiment(
    id="statebus.real-agents",
    seed_file=SEED_FILE,
    exercise="Hard 1",
    title="Three real agent processes on one JSON file, one Store key and one Stream",
)
def real_agents(ctx: LabContext) -> LabResult:
    agents, items = 3, (4 if ctx.quick else 10)
    t = Table(
        f"{agents} OS processes × {items} findings (FakeLLM + 2–10 ms emulated model latency)",
        ["run", "how it writes", "produced", "kept", "lost", "retries", "model calls", "seconds"],
    )
    how = {
        "json": "read file, think, write file (no check)",
        "store": "Store key, write(expect=version)",
        "stream": "Stream.append(message_id, expect_last_seq)",
    }
    facts: dict[str, Any] = {}
    for i, mode in enumerate(("json", "store", "stream")):
        r = run_real_agents(
            mode, ctx.workdir, url=ctx.db, agents=agents, items=items, seed=ctx.seed
        )
        t.add(
            f"real: {mode}",
            how[mode],
            r.produced,
            r.kept,
            r.lost,
            r.retries,
            r.model_calls,
            round(r.seconds, 2),
        )
        facts[mode] = {
            "produced": r.produced,
            "kept": r.kept,
            "lost": r.lost,
            "retries": r.retries,
            "model_calls": r.model_calls,
            "dedup_hits": r.dedup_hits,
        }
        ctx.progress(i + 1, 4)
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    for p, label in (("last_writer_wins", "json"), ("optimistic", "store")):
        m = shared.averaged(p, agents=agents, seeds=seeds, items=items)
        t.add(
            f"simulated: {p}",
            f"prediction for '{label}'",
            int(m["produced"]),
            rounded(m["kept"]),
            rounded(m["lost"]),
            rounded(m["retries"]),
            rounded(m["model_calls"]),
            "",
        )
        facts[f"sim_{p}"] = m
    ctx.progress(4, 4)
    j, s, st = facts["json"], facts["store"], facts["stream"]
    answer = (
        f"Plain read-modify-write on one JSON file lost {j['lost']} of {j['produced']} "
        f"findings with {j['retries']} retries and {j['model_calls']} model calls. With a "
        f"version check the Store key lost {s['lost']} with {s['retries']} retries and "
        f"{s['model_calls']} model calls, the Stream lost {st['lost']} with {st['retries']} "
        f"retries and {st['model_calls']} calls, and {st['dedup_hits']} of {agents} retried "
        "appends (same id, same payload) were recognised as duplicates. "
        + compare(j["lost"], facts["sim_last_writer_wins"]["lost"], "lost findings (json)")
        + " "
        + compare(s["retries"], facts["sim_optimistic"]["retries"], "retries (store)")
        + " The simulation counts ticks, not seconds, and one run of real processes depends "
        "on scheduling: read the two as the same order of magnitude, not the same number. "
        "Model: FakeLLM (a seeded fake, not a real LLM); the date is in the parameters."
    )
    return LabResult(
        tables=[t],
        facts=facts,
        answer=answer,
        params={
            "agents": agents,
            "items": items,
            "db": ctx.db or "sqlite (workdir)",
            "seeds": seeds,
        },
    )
