"""AgentDojo's verdicts on the victim's runs: its own utility and security functions, and
:class:`Verdicts`, which asks them once per environment and calls made."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Verdicts", "verdict"]


def verdict(task: Any, output: str, pre: Any, post: Any, traces: list[Any]) -> bool:
    """AgentDojo's own judgement of ``task`` (utility of a user task, security of an
    injection task) on the post-environment and the calls made."""
    return _verdict(task, output, pre, post, traces)


def _signature(calls: Sequence[Any]) -> tuple[tuple[str, str], ...]:
    return tuple((c.function, repr(sorted(c.args.items()))) for c in calls)


class Verdicts:
    """AgentDojo's verdicts, remembered per environment (``env_key``: which environment the
    runs start from, e.g. ``(suite, vectors, injected text)``; None: not remembered).

    A verdict is a function of the task, the answer shown, the pre-environment and the
    post-environment; the post-environment is the pre-environment after the calls made, in
    order (AgentDojo's tools are deterministic but for timestamps of now, which no verdict
    reads). So runs from one ``env_key`` that made the same calls and showed the same answer
    get the same verdict: it is computed once (AgentDojo's checks diff whole environments,
    which is most of the experiment's time otherwise).
    """

    def __init__(self) -> None:
        self._seen: dict[Any, bool] = {}
        self._starts: dict[Any, tuple[Any, list[Any]]] = {}
        self._plans: dict[Any, list[Any]] = {}
        self.computed = 0
        self.asked = 0

    def start(self, env_key: Any, user_task: Any, env: Any) -> tuple[Any, list[Any]]:
        """The pre-environment of ``user_task`` on ``env`` (``init_environment`` on a copy,
        never changed afterwards) and the task's ground-truth calls on it, once per
        ``env_key``: every policy's run from that environment starts from them."""
        key = (env_key, getattr(user_task, "ID", ""))
        if env_key is not None and key in self._starts:
            return self._starts[key]
        pre = user_task.init_environment(env.model_copy(deep=True))
        got = pre, list(user_task.ground_truth(pre.model_copy(deep=True)))
        if env_key is not None:
            self._starts[key] = got
        return got

    def injected_calls(
        self,
        env_key: Any,
        task: Any,
        plan: Callable[[Any], Sequence[Any]],
        env: Any,
        traces: list[Any],
    ) -> list[Any]:
        """``plan`` on a copy of ``env`` (the environment as the victim reads the injection),
        once per environment: from one ``env_key``, the same calls made so far make the same
        environment."""
        key = None
        if env_key is not None:
            key = (env_key, getattr(task, "ID", ""), _signature(traces))
            if key in self._plans:
                return self._plans[key]
        got = list(plan(env.model_copy(deep=True)))
        if key is not None:
            self._plans[key] = got
        return got

    def verdict(
        self, env_key: Any, task: Any, output: str, pre: Any, post: Any, traces: list[Any]
    ) -> bool:
        """AgentDojo's utility (user task) or security (injection task) verdict."""
        self.asked += 1
        key = None
        if env_key is not None:
            key = (
                env_key,
                type(task).__name__,
                getattr(task, "ID", ""),
                output,
                _signature(traces),
            )
            if key in self._seen:
                return self._seen[key]
        got = _verdict(task, output, pre, post, traces)
        self.computed += 1
        if key is not None:
            self._seen[key] = got
        return got


def _verdict(task: Any, output: str, pre: Any, post: Any, traces: list[Any]) -> bool:
    from agentdojo.base_tasks import BaseUserTask

    if isinstance(task, BaseUserTask):
        got = task.utility_from_traces(output, pre, post, traces)
        return bool(got if got is not None else task.utility(output, pre, post))
    got = task.security_from_traces(output, pre, post, traces)
    return bool(got if got is not None else task.security(output, pre, post))
