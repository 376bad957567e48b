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

from surefoot.errors import ConfigError, ConflictError

from .._registry import FAKE_MODEL, LabContext, LabResult, Table, experiment
from ..local_model import LabModel
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
        model_calls: model requests made in all processes (a real model's retries
            included). dedup_hits: retried appends the stream recognised as duplicates
            (``stream`` mode). model_retries: requests surefoot's policy repeated (a real
            model: errors and malformed tool calls). tokens: prompt + completion tokens (a
            real model). malformed_calls: replies refused for a missing or broken
            ``add_finding`` call; gave_up: findings whose every attempt was malformed (their
            text is recorded as it came).
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
    model_retries: int = 0
    tokens: int = 0
    malformed_calls: int = 0
    gave_up: int = 0


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


_PROMPT = (
    "You are agent {agent}. Write one short new finding about caching for LLM agents "
    "(the team list has {n}; this is number {i}) as JSON: "
    '{{"name": "add_finding", "arguments": {{"text": "..."}}}}'
)


class _RealThinker:
    """The real model's side of an agent: one ``add_finding`` tool call per finding."""

    def __init__(self, llm: dict[str, Any]) -> None:
        from surefoot.resilience import Backoff, RetryPolicy

        from ..local_model import LabModel

        model = LabModel(llm["url"], llm["model"], "", max_tokens=llm["max_tokens"])
        # one retry: a malformed call is asked again once, then recorded as it came
        policy = RetryPolicy(max_attempts=2, backoff=Backoff(base=0.1, cap=1.0))
        self.client = model.client(policy=policy)
        self.malformed = self.gave_up = 0

    def __call__(self, agent: str, i: int, n: int) -> str:
        from ..toolcalls import ask_tool_call

        prompt = _PROMPT.format(agent=agent, n=n, i=i + 1)
        messages = [{"role": "user", "content": prompt}]
        r = ask_tool_call(
            self.client,
            messages,
            "add_finding",
            temperature=0.7,
            max_tokens=self.client.max_tokens,  # an OpenAI-compatible server gets none unless given
        )
        self.malformed += r.malformed_replies
        if r.call is None:
            self.gave_up += 1
            return r.text[:80]  # recorded as text: the store is under test, not the format
        return str(r.call.arguments.get("text", ""))[:80]

    def counts(self) -> dict[str, int]:
        t = self.client.meter.totals
        return {
            "model_calls": t.attempts,
            "model_retries": t.attempts - t.calls - self.gave_up,
            "tokens": t.prompt_tokens + t.completion_tokens,
            "malformed_calls": self.malformed,
            "gave_up": self.gave_up,
        }


def _barrier(folder: Path, agent: str, agents: int, limit: float = 20.0) -> None:
    (folder / f"ready-{agent}").touch()
    deadline = time.monotonic() + limit
    while len(list(folder.glob("ready-*"))) < agents and time.monotonic() < deadline:
        time.sleep(0.001)


def agent_process(cfg: dict[str, Any]) -> dict[str, Any]:
    """One agent's run in its own process: add ``cfg["items"]`` findings; return its counts."""
    from surefoot.llm import FakeLLM

    agent, mode, items = cfg["agent"], cfg["mode"], cfg["items"]
    think = (cfg["think"][0], cfg["think"][1])
    rng = random.Random(f"{cfg['seed']}:{agent}")
    llm = FakeLLM(seed=cfg["seed"])
    real = _RealThinker(cfg["llm"]) if cfg.get("llm") else None

    def think_(i: int, n: int) -> str:
        return real(agent, i, n) if real else _think(llm, rng, agent, i, n, think)

    retries = dedup = 0
    if mode == "store":
        from surefoot.statebus import Store

        st = Store(cfg["url"], namespace=cfg["name"])
        st.register_agent(agent)
        s = st.session(agent)
    elif mode == "stream":
        from surefoot.statebus import Stream

        stream = Stream(cfg["url"], cfg["name"])
    _barrier(Path(cfg["barrier"]), agent, cfg["agents"])
    i = 0
    while i < items:
        if mode == "json":
            path = Path(cfg["path"])
            base = json.loads(path.read_text())
            text = think_(i, len(base))
            tmp = path.with_name(f".{agent}.tmp")
            tmp.write_text(json.dumps([*base, {"agent": agent, "i": i, "text": text}]))
            os.replace(tmp, path)  # atomic file swap: no torn file, but still a lost update
        elif mode == "store":
            e = s.read("findings")
            base = list(e.value) if e is not None else []
            text = think_(i, len(base))
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
            text = think_(i, last)
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
    counts = (
        real.counts()
        if real
        else {"model_calls": llm.calls, "model_retries": 0, "tokens": 0, "malformed_calls": 0}
    )
    return {"agent": agent, "retries": retries, "dedup_hits": dedup, **counts}


# Not ``python -m`` on this module: that would import it twice (as the package's submodule
# and as ``__main__``) and register the experiment twice.
_AGENT_MAIN = (
    "import json, sys; from surefoot_lab.statebus.real_agents import agent_process; "
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
    llm: LabModel | None = None,
) -> RealAgentsReport:
    """Run ``agents`` real processes adding ``items`` findings each; count what survived.

    Args:
        mode: ``json``, ``store`` or ``stream``.
        workdir: a folder for the JSON file, the barrier and the default SQLite file.
        url: the storage for ``store``/``stream`` (a SQLite file in ``workdir`` by default;
            ``postgresql://`` or ``redis://`` when those backends exist). ``memory://`` is
            refused: separate processes cannot share it.
        think: seconds of emulated model latency per call (uniform range; FakeLLM only).
        llm: a real model: each finding is one ``add_finding`` tool call parsed from its
            text, with surefoot's retries (malformed calls are retried, then counted).

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
                "llm": None
                if llm is None
                else {"url": llm.base_url, "model": llm.model, "max_tokens": llm.max_tokens},
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
            p.communicate()  # reaps it and closes both pipes (a killed agent left them open)
    seconds = time.perf_counter() - started
    if mode == "json":
        final = json.loads(path.read_text())
    elif mode == "store":
        from surefoot.statebus import Store

        st = Store(url, namespace=name)
        e = st.read("findings")
        final = list(e.value) if e is not None else []
        st.close()
    else:
        from surefoot.statebus import Stream

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
        model_retries=sum(r["model_retries"] for r in results),
        tokens=sum(r["tokens"] for r in results),
        malformed_calls=sum(r["malformed_calls"] for r in results),
        gave_up=sum(r.get("gave_up", 0) for r in results),
    )


@experiment(
    id="statebus.real-agents",
    seed_file=SEED_FILE,
    exercise="Hard 1",
    title="Three real agent processes on one JSON file, one Store key and one Stream",
    real_llm=True,
)
def real_agents(ctx: LabContext) -> LabResult:
    agents, items = 3, (4 if ctx.quick else 10)
    real_items = 2  # bounded: every finding is a real model call (and its retries)
    t = Table(
        f"{agents} OS processes × {items} findings (FakeLLM + 2–10 ms emulated model latency)"
        + (
            f"; then × {real_items} findings on {ctx.llm.model}, one add_finding tool call each"
            if ctx.llm
            else ""
        ),
        [
            "run",
            "model",
            "how it writes",
            "produced",
            "kept",
            "lost",
            "retries",
            "model calls",
            "model retries",
            "malformed tool calls",
            "tokens",
            "seconds",
        ],
    )
    how = {
        "json": "read file, think, write file (no check)",
        "store": "Store key, write(expect=version)",
        "stream": "Stream.append(message_id, expect_last_seq)",
    }
    facts: dict[str, Any] = {}
    runs: list[tuple[str, LabModel | None, int]] = [(m, None, items) for m in MODES]
    if ctx.llm is not None:
        runs += [(m, ctx.llm, real_items) for m in MODES]
    steps = len(runs) + 1
    for i, (mode, llm, n) in enumerate(runs):
        r = run_real_agents(
            mode,
            ctx.workdir,
            url=ctx.db,
            agents=agents,
            items=n,
            seed=ctx.seed,
            llm=llm,
            timeout=600.0 if llm else 120.0,
        )
        t.add(
            f"real: {mode}",
            "FakeLLM" if llm is None else llm.model,
            how[mode],
            r.produced,
            r.kept,
            r.lost,
            r.retries,
            r.model_calls,
            "-" if llm is None else r.model_retries,
            "-" if llm is None else r.malformed_calls,
            "-" if llm is None else r.tokens,
            round(r.seconds, 2),
        )
        facts[mode if llm is None else f"llm_{mode}"] = {
            "produced": r.produced,
            "kept": r.kept,
            "lost": r.lost,
            "retries": r.retries,
            "model_calls": r.model_calls,
            "dedup_hits": r.dedup_hits,
            **(
                {}
                if llm is None
                else {
                    "model_retries": r.model_retries,
                    "malformed_calls": r.malformed_calls,
                    "gave_up": r.gave_up,
                    "tokens": r.tokens,
                    "seconds": r.seconds,
                }
            ),
        }
        ctx.progress(i + 1, steps)
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    for p, label in (("last_writer_wins", "json"), ("optimistic", "store")):
        m = shared.averaged(p, agents=agents, seeds=seeds, items=items)
        t.add(
            f"simulated: {p}",
            "FakeLLM (ticks)",
            f"prediction for '{label}'",
            int(m["produced"]),
            rounded(m["kept"]),
            rounded(m["lost"]),
            rounded(m["retries"]),
            rounded(m["model_calls"]),
            "",
            "",
            "",
            "",
        )
        facts[f"sim_{p}"] = m
    ctx.progress(steps, steps)
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
        "on scheduling: read the two as the same order of magnitude, not the same number."
    )
    if ctx.llm is None:
        answer += " Model: FakeLLM (a seeded fake, not a real LLM); the date is in the parameters."
    else:
        lj, ls, lst = facts["llm_json"], facts["llm_store"], facts["llm_stream"]
        calls = sum(f["model_calls"] for f in (lj, ls, lst))
        bad = sum(f["malformed_calls"] for f in (lj, ls, lst))
        gave = sum(f["gave_up"] for f in (lj, ls, lst))
        answer += (
            f" On the real model ({ctx.llm.model}, {real_items} findings per agent, each one "
            "add_finding tool call parsed from the reply's text): the JSON file lost "
            f"{lj['lost']} of {lj['produced']}, the Store key {ls['lost']} "
            f"({ls['retries']} version retries), the Stream {lst['lost']} ({lst['retries']} "
            f"retries, {lst['dedup_hits']} duplicates recognised). The model made {calls} "
            f"requests ({sum(f['tokens'] for f in (lj, ls, lst))} tokens); {bad} replies had "
            f"no well-formed tool call and were retried by surefoot, and {gave} findings "
            "stayed malformed after every attempt (their text was recorded as it came). "
            f"Seconds per mode: json {lj['seconds']:.1f}, store {ls['seconds']:.1f}, stream "
            f"{lst['seconds']:.1f}."
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
            **(
                {}
                if ctx.llm is None
                else {"real_items": real_items, "max_tokens": ctx.llm.max_tokens}
            ),
        },
        model=FAKE_MODEL if ctx.llm is None else f"{FAKE_MODEL}, and {ctx.llm.label}",
    )
