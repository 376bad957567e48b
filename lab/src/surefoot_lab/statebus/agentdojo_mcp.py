"""AgentDojo through MCP: a suite's tools served by an MCP server, the victim calling them
through surefoot's MCP client, so the labels and the policy are the ones a deployed runtime
gives.

:func:`mcp_server` serves a suite's tools with the ``mcp`` SDK's low-level server (in
process; the environment it acts on is the pair's, so AgentDojo's own functions judge the
result). Each tool's input schema is AgentDojo's parameter model; results are returned as
structured content ``{"result": ...}``. :func:`run_pairs` runs the obedient victim
(``agentdojo_victim``) against it as durable workflows of a ``surefoot.durable.App``: the
listing is a journalled step, every call an effect step with a key, and each call is checked
by the policy ``surefoot.integrations.mcp`` derives from the MCP listing plus the lab's
declarations (``agentdojo_policy``: sources per argument, output field kinds). What the
server returns is labelled by the MCP client, untrusted, per the declared field kinds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from surefoot import durable
from surefoot.errors import TrustError
from surefoot.guard import Labeled
from surefoot.integrations.mcp import McpClient, McpServer, McpTool

from .agentdojo_policy import policy_for
from .agentdojo_victim import Outcome, Step, victim_steps

__all__ = [
    "FULL",
    "ROWS",
    "SUITES",
    "PairResult",
    "compare",
    "declarations",
    "lab_part",
    "label_trace",
    "mcp_server",
    "run_pairs",
]


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump) and hasattr(type(value), "model_fields"):
        return _plain(dump(mode="json"))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def mcp_server(suite: Any, box: dict[str, Any]) -> Any:
    """An in-process MCP server of ``suite``'s tools acting on ``box["env"]``."""
    from agentdojo.functions_runtime import FunctionsRuntime
    from mcp.server.lowlevel.server import Server
    from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool

    runtime = FunctionsRuntime(suite.tools)
    tools = [
        Tool(
            name=f.name,
            description=f.description,
            input_schema=f.parameters.model_json_schema(),
        )
        for f in suite.tools
    ]
    schemas = {f.name: f.parameters.model_json_schema() for f in suite.tools}

    async def on_list(ctx: Any, params: Any) -> Any:
        return ListToolsResult(tools=tools)

    async def on_call(ctx: Any, params: Any) -> Any:
        result, error = runtime.run_function(box["env"], params.name, dict(params.arguments or {}))
        if error is not None:
            return CallToolResult(
                content=[TextContent(type="text", text=str(error))], is_error=True
            )
        plain = _plain(result)
        text = json.dumps(plain)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content={"result": plain}
        )

    return Server(
        name=f"agentdojo-{suite.name}",
        on_list_tools=on_list,
        on_call_tool=on_call,
        get_tool_input_schema=schemas.get,
    )


def declarations(suite: str) -> dict[str, McpTool]:
    """The lab's declarations of ``suite`` as the MCP client takes them."""
    return {
        name: McpTool(
            args=dict(t.args),
            fields=dict(t.fields),
            document_arg=t.document_arg,
            items=t.items,
            audience=t.audience,
            carried=t.carried,
            readers=t.readers,
        )
        for name, t in policy_for(suite).tools.items()
    }


def _declared(name: str, suite: Any, how: str) -> dict[str, McpTool]:
    if how == "lab":
        return declarations(name)
    if how == "schemas":
        return {}
    if how == "any":
        return {
            f.name: McpTool(
                args=dict.fromkeys(f.parameters.model_json_schema().get("properties", {}), "any")
            )
            for f in suite.tools
        }
    raise ValueError(f"declared must be 'lab', 'schemas' or 'any', got {how!r}")


@dataclass(frozen=True)
class PairResult:
    """One pair (or a user task alone) run through MCP."""

    user_task: str
    injection_task: str | None
    injected: bool
    utility: bool
    security: bool
    refused: int
    # every call the victim put to the policy, with the sources of each argument's label
    # (the elements' too): equal to the direct run's when MCP lost or added no label
    labels: tuple[str, ...] = ()


def label_trace(out: Outcome) -> tuple[str, ...]:
    """``tool(arg<-sources; ...)`` per call ``out`` checked, each argument's sources sorted
    (and each list element's, in brackets)."""

    def sources(x: Labeled[Any]) -> str:
        own = ",".join(sorted(x.label.sources))
        if isinstance(x.value, list) and all(isinstance(v, Labeled) for v in x.value):
            return own + "[" + "|".join(sources(v) for v in x.value) + "]"
        return own

    return tuple(
        f"{tool}({'; '.join(f'{k}<-{sources(a)}' for k, a in sorted(args.items()))})"
        for tool, args in out.checked
    )


async def _victim(
    tools: Any,
    suite: Any,
    user_task: Any,
    box: dict[str, Any],
    injection: tuple[Any, Callable[[Any], Sequence[Any]]] | None,
) -> Outcome:
    """The obedient victim of ``agentdojo_victim`` (the same loop, ``victim_steps``), its
    calls checked, made and labelled by the MCP client under the policy it derived."""
    steps = victim_steps(suite, user_task, tools.policy, box["env"], injection)

    async def run(step: Step) -> Any:
        box["env"] = step.env  # the environment the server acts on: the victim's copy
        try:
            got = await tools.call(step.function, step.args)
        except TrustError as exc:
            return exc
        if got.is_error or got.structured is None:
            return None
        # the labels the deployed runtime assigned (McpResult.structured), as they are
        return got.structured["result"]

    try:
        step = next(steps)
        while True:
            step = steps.send(await run(step))
    except StopIteration as done:
        outcome: Outcome = done.value
        return outcome


def run_pairs(
    name: str,
    suite: Any,
    pairs: Sequence[tuple[str, str | None]],
    envs: Callable[[str, str | None], Any],
    plans: Callable[[str], tuple[Any, Callable[[Any], Sequence[Any]]]],
    *,
    declared: str = "lab",
) -> list[PairResult]:
    """Run each ``(user task, injection task or None)`` through MCP, as a durable run.

    Args:
        envs: the environment a pair starts from (injected or clean).
        plans: injection task id -> (the task, its calls as a function of the environment).
        declared: ``lab``: the lab's declarations; ``schemas``: the policy derived from the
            MCP schemas alone (every argument accepts untainted values only); ``any``: every
            argument accepts anything (no control: what the attacks do through MCP).
    """
    box: dict[str, Any] = {}
    app = durable.App("sqlite://", poll=0.01)
    client = McpClient(
        app,
        McpServer.custom(f"agentdojo-{name}", lambda: mcp_server(suite, box)),
        tools=_declared(name, suite, declared),
    )

    @app.workflow(name="agentdojo_pair")
    async def pair(uid: str, tid: str | None) -> dict[str, Any]:
        tools = await client.tools()
        out = await _victim(tools, suite, suite.user_tasks[uid], box, plans(tid) if tid else None)
        return {
            "injected": out.injected,
            "utility": out.utility,
            "security": out.security,
            "refused": len(out.refused),
            "labels": list(label_trace(out)),
        }

    results = []
    try:
        for n, (uid, tid) in enumerate(pairs):
            box["env"] = envs(uid, tid)
            got = app.start(pair, uid, tid, run_id=f"{uid}/{tid}/{n}").result(timeout=300)
            got["labels"] = tuple(got["labels"])
            results.append(PairResult(uid, tid, **got))
    finally:
        app.close()
    return results


def _chosen(ids: list[str], which: int | Sequence[str] | None) -> list[str]:
    if which is None or isinstance(which, int):
        return ids[:which]
    unknown = sorted(set(which) - set(ids))
    if unknown:
        raise ValueError(f"unknown tasks {unknown}")
    return list(which)


def compare(
    name: str,
    *,
    template: str = "important_instructions",
    users: int | Sequence[str] | None = None,
    injections: int | Sequence[str] | None = None,
) -> dict[str, Any]:
    """``name``'s pairs through MCP (declared, and schemas alone) beside the direct victim
    under the same default policy: user tasks kept alone, injection tasks that won a pair,
    the runs whose outcome differs between MCP and direct, and those where the label of an
    argument of a call the victim made differs (:func:`label_trace`).

    Args:
        users, injections: the first N user (injection) tasks, or the tasks of these ids;
            None: all of them.
    """
    from . import agentdojo as lab
    from .agentdojo_victim import run_victim

    suite = lab.load_suites()[name]
    clean = lab.clean_environment(name, suite)
    uids = _chosen(list(suite.user_tasks), users)
    tids = _chosen(list(suite.injection_tasks), injections)
    seen = lab.injection_candidates(suite)
    texts = {t: lab.attack_text(template, suite, suite.injection_tasks[t].GOAL) for t in tids}
    plans = {t: lab.injection_calls(name, t, suite.injection_tasks[t])[0] for t in tids}

    def env(uid: str, tid: str | None) -> Any:
        if tid is None:
            return clean.model_copy(deep=True)
        return suite.load_and_inject_default_environment(dict.fromkeys(seen[uid], texts[tid]))

    def plan(tid: str) -> tuple[Any, Callable[[Any], Sequence[Any]]]:
        return suite.injection_tasks[tid], plans[tid]

    pairs: list[tuple[str, str | None]] = [(u, None) for u in uids]
    pairs += [(u, t) for t in tids for u in uids]
    policy = policy_for(name)
    direct = [
        PairResult(u, t, o.injected, o.utility, o.security, len(o.refused), label_trace(o))
        for u, t in pairs
        for o in [run_victim(suite, suite.user_tasks[u], policy, env(u, t), plan(t) if t else None)]
    ]
    rows = {"direct": direct}
    rows["mcp"] = run_pairs(name, suite, pairs, env, plan)
    rows["mcp, schemas alone"] = run_pairs(name, suite, pairs, env, plan, declared="schemas")
    rows["mcp, every argument any"] = run_pairs(name, suite, pairs, env, plan, declared="any")

    def figures(rs: list[PairResult]) -> dict[str, Any]:
        won = sorted({r.injection_task for r in rs if r.injection_task and r.security})
        return {
            "user tasks kept": sum(r.utility for r in rs if r.injection_task is None),
            "injection tasks won": len(won),
            "pairs injected": sum(r.injected for r in rs if r.injection_task),
        }

    return {
        "suite": name,
        "template": template,
        "user tasks": len(uids),
        "injection tasks": len(tids),
        "figures": {k: figures(v) for k, v in rows.items()},
        "differ from direct": [
            f"{m.user_task}/{m.injection_task}"
            for m, d in zip(rows["mcp"], direct, strict=True)
            if _outcome(m) != _outcome(d)
        ],
        "labels differ from direct": [
            f"{m.user_task}/{m.injection_task}"
            for m, d in zip(rows["mcp"], direct, strict=True)
            if m.labels != d.labels
        ],
    }


def _outcome(r: PairResult) -> tuple[bool, bool, bool, int]:
    return r.injected, r.utility, r.security, r.refused


ROWS = ("direct", "mcp", "mcp, schemas alone", "mcp, every argument any")
_ROW_NAMES = {
    "direct": "direct, lab's declarations",
    "mcp": "MCP, lab's declarations",
    "mcp, schemas alone": "MCP, schemas alone",
    "mcp, every argument any": "MCP, no control",
}


def lab_part(
    suites: Sequence[str], progress: Callable[[int, int], None] = lambda done, total: None
) -> tuple[Any, dict[str, Any], str]:
    """The ``statebus.agentdojo`` experiment's MCP rows (``--full``): :func:`compare` for each
    of ``suites``, as a table, facts and a sentence for its answer."""
    import time

    from .._registry import Table

    t = Table(
        "AgentDojo through MCP (template important_instructions, obedient victim): injection "
        "tasks that won a pair / user tasks kept alone, beside the direct run; the runs (pairs "
        "and user tasks alone) whose outcome, and whose label trace, differ from the direct run",
        ["suite", *(_ROW_NAMES[r] for r in ROWS), "runs differing: outcome, labels", "seconds"],
    )
    facts: dict[str, Any] = {}
    parts = []
    try:
        import mcp  # noqa: F401  (the surefoot[mcp] extra)
    except ImportError as exc:
        t.add("all", *(["-"] * len(ROWS)), "-", f"skipped: no mcp package ({exc})")
        return t, {"mcp_skipped": str(exc)}, "Not measured through MCP: no mcp package."
    for n, name in enumerate(suites):
        started = time.monotonic()
        got = compare(name)
        took = round(time.monotonic() - started, 1)
        fig = got["figures"]
        n_inj, n_user = got["injection tasks"], got["user tasks"]
        runs = n_user * (n_inj + 1)
        cells = [
            f"{fig[r]['injection tasks won']}/{n_inj}, {fig[r]['user tasks kept']}/{n_user}"
            for r in ROWS
        ]
        differing = [len(got["differ from direct"]), len(got["labels differ from direct"])]
        t.add(name, *cells, f"{differing[0]}/{runs}, {differing[1]}/{runs}", took)
        facts[f"mcp[{name}]"] = {**got, "seconds": took}
        parts.append(
            f"{name} {', '.join(f'{_ROW_NAMES[r]} {c}' for r, c in zip(ROWS, cells, strict=True))}"
        )
        progress(n + 1, len(suites))
    differ = sum(len(facts[f"mcp[{s}]"]["differ from direct"]) for s in suites)
    facts["mcp_differ_from_direct"] = differ
    labels = sum(len(facts[f"mcp[{s}]"]["labels differ from direct"]) for s in suites)
    facts["mcp_labels_differ_from_direct"] = labels
    sentence = (
        "Through an MCP server (surefoot.integrations.mcp, the policy derived from the MCP "
        "schemas plus the lab's declarations; injection tasks won, user tasks kept): "
        + "; ".join(parts)
        + f"; {differ} runs (pairs and user tasks alone) differ from the direct run in their "
        f"outcome, {labels} in the label of an argument of a call."
    )
    return t, facts, sentence


SUITES = ("banking", "slack", "travel")
"""What ``python -m surefoot_lab.statebus.agentdojo_mcp`` runs by default (every pair of each,
a few minutes); ``--full`` adds workspace, the largest suite (40 user tasks x 14 injection
tasks: 600 runs per row, the longest part)."""
FULL = (*SUITES, "workspace")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m surefoot_lab.statebus.agentdojo_mcp [SUITE ...] [--full] [--users N]
    [--injections N]``: print :func:`compare` per suite, with the seconds it took."""
    import argparse
    import sys
    import time
    import warnings

    cli = argparse.ArgumentParser(prog="python -m surefoot_lab.statebus.agentdojo_mcp")
    cli.add_argument("suites", nargs="*", help=f"suites to run (default: {' '.join(SUITES)})")
    cli.add_argument("--full", action="store_true", help=f"every suite: {' '.join(FULL)}")
    cli.add_argument("--users", type=int, default=None, help="the first N user tasks only")
    cli.add_argument(
        "--injections", type=int, default=None, help="the first N injection tasks only"
    )
    args = cli.parse_args(list(argv if argv is not None else sys.argv[1:]))
    warnings.simplefilter("ignore")  # AgentDojo's own deprecation warnings
    for name in args.suites or (FULL if args.full else SUITES):
        started = time.monotonic()
        got = compare(name, users=args.users, injections=args.injections)
        got["seconds"] = round(time.monotonic() - started, 1)
        print(json.dumps(got, indent=1), flush=True)


if __name__ == "__main__":
    main()
