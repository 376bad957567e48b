"""The registry: what an app declared, with no I/O of its own: its workflows (by name and
version) and their timeouts, its steps, its named queues and its schedules.

``App`` fills it from its decorators and declarations; the executor, the worker, new runs
and run management look things up in it instead of asking the app.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, WorkflowNotFoundError
from ._defs import CompDef, StepDef, accepts
from ._queues import DeclaredQueues
from ._retry import StepRetry
from ._schedules import DeclaredSchedules
from ._values import annotation_of, params_of
from ._versions import Workflow

__all__ = ["Registry"]


class Registry:
    """Workflows by (name, version), the latest version of each name, and steps by name.

    Attributes:
        queues: the named queues declared here (``App.queue``).
        schedules: the schedules declared here (``App.schedule``).
        timeouts: seconds from a run's start to its deadline, by (workflow, version)
            (``App.workflow(timeout=…)``).
    """

    __slots__ = ("_latest", "_steps", "_workflows", "queues", "schedules", "timeouts")

    def __init__(self) -> None:
        self._workflows: dict[tuple[str, str], Workflow] = {}
        self._latest: dict[str, Workflow] = {}
        self._steps: dict[str, StepDef] = {}
        self.queues = DeclaredQueues()
        self.schedules = DeclaredSchedules()
        self.timeouts: dict[tuple[str, str], float] = {}

    def add_step(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None,
        effect: bool,
        compensate: Callable[..., Any] | None,
        retry: Any,
        compensate_retry: Any,
        idempotent: bool,
    ) -> StepDef:
        """Register ``fn`` as a step (see ``App.step``); its definition.

        Raises:
            ConfigError: ``compensate`` on a pure step, or a name registered twice.
            UnsupportedTypeError: its return annotation cannot be rebuilt from JSON safely.
        """
        sname = name or fn.__name__
        if compensate is not None and not effect:
            raise ConfigError(
                f"step {sname!r} has compensate= but is not an effect; only effects are "
                "undone. Add effect=True or drop compensate."
            )
        if sname in self._steps:
            raise ConfigError(f"step name {sname!r} is registered twice; pass name=")
        comp = None
        if compensate is not None:
            comp = CompDef(
                getattr(compensate, "__name__", repr(compensate)),
                compensate,
                inspect.iscoroutinefunction(compensate),
                accepts(compensate, "key"),
                accepts(compensate, "result"),
                StepRetry(compensate_retry),
            )
        sd = StepDef(
            sname,
            fn,
            "effect" if effect else "pure",
            inspect.iscoroutinefunction(fn),
            effect and accepts(fn, "key"),
            idempotent,
            StepRetry(retry),
            comp,
            annotation_of(fn, f"step {sname!r}"),
        )
        self._steps[sname] = sd
        return sd

    def add_workflow(self, fn: Callable[..., Any], *, name: str | None, version: str) -> Workflow:
        """Register ``fn`` as version ``version`` of a workflow (see ``App.workflow``).

        Raises:
            ConfigError: the same name and version registered twice.
            UnsupportedTypeError: a parameter or return annotation cannot be rebuilt from
                JSON safely.
        """
        wname = name or fn.__name__
        if (wname, version) in self._workflows:
            raise ConfigError(f"workflow {wname!r} version {version!r} is registered twice")
        wf = Workflow(fn, wname, version)
        where = f"workflow {wname!r}"
        wf.returns = annotation_of(fn, where)
        wf.params = params_of(fn, where)
        self._workflows[(wname, wf.version)] = wf
        self._latest[wname] = wf
        return wf

    def step(self, name: str) -> StepDef | None:
        """The step registered under ``name``, or None."""
        return self._steps.get(name)

    def registered(self) -> list[tuple[str, str]]:
        """(name, version) of every workflow registered here."""
        return sorted(self._workflows)

    def get(self, name: str, version: str) -> Workflow | None:
        """The workflow registered under ``name`` and ``version``, or None."""
        return self._workflows.get((name, version))

    def resolve(self, workflow: Workflow | str) -> Workflow:
        """``workflow`` itself, or the latest version registered under that name.

        Raises:
            WorkflowNotFoundError: no workflow of that name is registered.
        """
        if isinstance(workflow, Workflow):
            return workflow
        if isinstance(workflow, str) and workflow in self._latest:
            return self._latest[workflow]
        known = ", ".join(sorted(self._latest)) or "none"
        raise WorkflowNotFoundError(
            f"no workflow {workflow!r} is registered with this app (registered: {known}); "
            "decorate it with @app.workflow"
        )

    def workflow_for(self, name: str, version: str) -> Workflow:
        """The workflow a run of ``name`` at ``version`` needs.

        Raises:
            WorkflowNotFoundError: that version is not registered here.
        """
        wf = self._workflows.get((name, version))
        if wf is None:
            have = ", ".join(v for (n, v) in self._workflows if n == name) or "none"
            raise WorkflowNotFoundError(
                f"workflow {name!r} version {version!r} is not registered here (versions "
                f"here: {have}); keep the old version registered until its runs finish"
            )
        return wf
