"""What SurefootDurability costs per operation, in counts (never times): commits per step,
walks over each journalled value, bytes per step as the history grows (issue 25 §3)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import pydantic_ai.durable_exec  # noqa: F401 - CI installs surefoot[pydantic-ai]
pytest.importorskip("pydantic_ai.durable_exec", reason="surefoot[pydantic-ai] is not installed")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from surefoot import durable
from surefoot.codec import _json
from surefoot.durable import _values
from surefoot.errors import RunFailedError
from surefoot.integrations._operations import OperationSteps
from surefoot.integrations.pydantic_ai import SurefootDurability


@pytest.fixture
def app(tmp_path: Path) -> Iterator[durable.App]:
    a = durable.App(f"sqlite:///{tmp_path / 'runs.db'}", poll=0.01, worker_id="t")
    yield a
    a.close()


def _batches(app: durable.App) -> list[list[str]]:
    """The names of the rows of every batch the journal commits, in order."""
    seen: list[list[str]] = []
    journal: Any = app.journal
    real = journal.commit

    def commit(records: list[Any], *rest: Any) -> list[bool]:
        seen.append([getattr(r, "name", None) or f"run:{r.status}" for r in records])
        return real(records, *rest)  # type: ignore[no-any-return]

    journal.commit = commit
    return seen


def _agent(app: durable.App, answer: int = 500) -> Agent[None, str]:
    """Per run: the model asks for ``lookup`` and the effect ``book`` at once, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked = sum(isinstance(m, ModelResponse) for m in messages)
        last_is_prompt = messages[-1].parts[-1].part_kind == "user-prompt"
        if last_is_prompt:
            return ModelResponse(
                parts=[
                    ToolCallPart("lookup", {"q": f"q{asked}"}, tool_call_id=f"l{asked}"),
                    ToolCallPart("book", {"city": "Paris"}, tool_call_id=f"b{asked}"),
                ]
            )
        return ModelResponse(parts=[TextPart("a" * answer)])

    agent = Agent(FunctionModel(model), name="cost", capabilities=[SurefootDurability(app)])

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"found {q}"

    @agent.tool_plain(metadata={"surefoot": {"effect": True}})
    def book(city: str) -> str:
        return f"booked {city}"

    return agent


def test_each_operation_is_one_commit_an_effect_two(app: durable.App) -> None:
    """A model request or a pure tool call commits once (its result); an effect twice (its
    intent before it runs, its result after); nothing else commits per operation."""
    agent = _agent(app)

    @app.workflow
    async def chat(turns: int) -> int:
        history: Any = None
        for i in range(turns):
            history = (await agent.run(f"turn {i}", message_history=history)).all_messages()
        return turns

    batches = _batches(app)
    assert app.start(chat, 3, run_id="c").result(timeout=30) == 3
    rows = [name for batch in batches for name in batch]
    model = "cost__model.request"
    steps = {s.name for s in app.show("c").steps}
    (tool,) = {n for n in steps if n.endswith(":lookup")}
    (effect,) = {n for n in steps if n.endswith(":book")}
    assert rows.count(model) == 6  # 2 a turn, one commit each
    assert rows.count("cost__operations") == 1  # once a run
    assert rows.count(tool) == 3  # one a turn
    assert rows.count(effect) == 3 * 2  # its intent before it runs, its result after
    step_rows = [r for r in rows if not r.startswith("run:")]
    assert len(step_rows) == 1 + 3 * (2 + 1 + 2)
    # every batch holding a step holds one row (no step waits for another's commit here)
    assert all(len(b) == 1 for b in batches if any(not n.startswith("run:") for n in b))


def test_a_journalled_operation_is_not_walked_in_python(
    app: durable.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operation's result is JSON already (PydanticAI's JSON codec made it): it is
    encoded by the C encoder and checked by decoding it once, without surefoot's Python walks
    (the tuple search before encoding, the type-by-type comparison after): a run of 3 turns
    (13 operations) walks as often as a run of 1 (5), for its own arguments and result."""
    agent = _agent(app)
    walks: list[str] = []
    real_mismatch, real_has_tuple = _values.mismatch, _json._has_tuple

    def mismatch(a: Any, b: Any, path: str) -> Any:
        if path == "$":
            walks.append("mismatch")
        return real_mismatch(a, b, path)

    def has_tuple(o: Any, depth: int = 0) -> Any:
        if depth == 0:
            walks.append("has_tuple")
        return real_has_tuple(o, depth)

    monkeypatch.setattr(_values, "mismatch", mismatch)
    monkeypatch.setattr(_json, "_has_tuple", has_tuple)

    @app.workflow
    async def chat(turns: int) -> list[str]:
        history: Any = None
        for i in range(turns):
            history = (await agent.run(f"turn {i}", message_history=history)).all_messages()
        return ["done"]

    per_run = []
    for turns, run_id in ((1, "one"), (3, "three")):
        walks.clear()
        assert app.start(chat, turns, run_id=run_id).result(timeout=30) == ["done"]
        assert len(app.show(run_id).steps) == 1 + 4 * turns  # operations, then 4 a turn
        per_run.append(list(walks))
    assert per_run[0] == per_run[1], per_run
    assert len(per_run[0]) <= 4, per_run  # the run's own: its arguments, result, header


def test_a_model_requests_journalled_bytes_do_not_grow_with_the_history(
    app: durable.App,
) -> None:
    """Each model request journals the response, never the history it was given: the 20th
    turn's request stores as many bytes as the first's (within the digits of its counters)."""
    agent = _agent(app, answer=300)

    @app.workflow
    async def chat(turns: int) -> int:
        history: Any = None
        for i in range(turns):
            history = (
                await agent.run(f"turn {i} " + "x" * 400, message_history=history)
            ).all_messages()
        return turns

    assert app.start(chat, 20, run_id="h").result(timeout=60) == 20
    sizes = [len(s.result or "") for s in app.show("h").steps if s.name == "cost__model.request"]
    assert len(sizes) == 40
    assert max(sizes[-2:]) - max(sizes[:2]) < 64, sizes


def test_a_value_that_is_not_plain_json_still_gets_the_full_check(app: durable.App) -> None:
    """The fast path holds only for values JSON gives back as they were: a tuple is still
    journalled as a tuple, an int key (which JSON turns into a string) still refused."""
    steps = OperationSteps(app)

    @app.workflow
    async def wf(which: str) -> Any:
        step = steps.step(f"op_{which}", json_values=True)

        async def body() -> Any:
            return {"pair": (1, 2)} if which == "tuple" else {1: "one"}

        return repr(await step(body))

    assert app.start(wf, "tuple", run_id="t").result(timeout=10) == "{'pair': (1, 2)}"
    handle = app.start(wf, "key", run_id="k")
    with pytest.raises(RunFailedError, match=r"UnsupportedTypeError.*the key 1"):
        handle.result(timeout=10)
