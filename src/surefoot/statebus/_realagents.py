"""Real agent processes sharing one findings list (Hard 1 of seed 000).

``run_real_agents`` starts ``agents`` OS processes (``python -m
surefoot.statebus._realagents``) that each add ``items`` findings, in one of three modes:

* ``json``: one shared JSON file, plain read-modify-write (read, think, write back);
* ``store``: a versioned ``Store`` key; the write carries the version read, a conflict makes
  the agent re-read, re-think (a new model call) and retry;
* ``stream``: a ``Stream``; each finding is appended with a message id and
  ``expect_last_seq`` (the version check), and every agent finally retries one append with
  the same id to show it is deduplicated.

"Thinking" is a FakeLLM call plus a seeded real sleep standing in for model latency, so the
processes overlap the way agents waiting on a model do. The processes wait on a file
barrier so they start together.
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

from ..errors import ConfigError, ConflictError

__all__ = ["MODES", "RealAgentsReport", "run_real_agents"]

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


def _worker(cfg: dict[str, Any]) -> dict[str, Any]:
    from ..llm import FakeLLM

    agent, mode, items = cfg["agent"], cfg["mode"], cfg["items"]
    think = (cfg["think"][0], cfg["think"][1])
    rng = random.Random(f"{cfg['seed']}:{agent}")
    llm = FakeLLM(seed=cfg["seed"])
    retries = dedup = 0
    if mode == "store":
        from ._store import Store

        st = Store(cfg["url"], namespace=cfg["name"])
        st.register_agent(agent)
        s = st.session(agent)
    elif mode == "stream":
        from ._stream import Stream

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
                    [sys.executable, "-m", "surefoot.statebus._realagents", json.dumps(cfg)],
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
        from ._store import Store

        st = Store(url, namespace=name)
        e = st.read("findings")
        final = list(e.value) if e is not None else []
        st.close()
    else:
        from ._stream import Stream

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


if __name__ == "__main__":
    print(json.dumps(_worker(json.loads(sys.argv[1]))))
