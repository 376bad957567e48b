"""A Temporal worker serving one surefoot app: its workflows and steps on one task queue."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from ...clock import Clock
from ...errors import ConfigError, StoreUnavailableError
from ._activities import run_step
from ._honour import WrappedClock
from ._url import TemporalConfig, parse_url
from ._wire import SERVED, Served
from ._workflow import SurefootWorkflow

__all__ = ["WorkflowClock", "connect", "make_worker", "serve", "unserve"]


class WorkflowClock(WrappedClock):
    """The app's clock, reading workflow time inside a Temporal workflow.

    ``app.sleep(5)`` computes ``app.clock.now() + 5``; inside a workflow that must be the
    workflow's (replayed) time, not the machine's, or the timer would differ on replay.
    Outside a workflow it is the clock the app had.
    """

    def __init__(self, inner: Clock) -> None:
        self.inner = inner

    def now(self) -> float:
        if workflow.in_workflow():
            return workflow.now().timestamp()
        return self.inner.now()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def connect(config: TemporalConfig) -> Client:
    """A client of the Temporal frontend at ``config.address``, in a namespace that exists.

    The namespace is checked here, once: otherwise the first call fails with a raw
    ``RPCError`` and an in-process worker's task dies unobserved ("Task exception was never
    retrieved"), and ``surefoot engine worker`` announces it serves before failing.

    Raises:
        StoreUnavailableError: it cannot be reached. ConfigError: no such namespace there.
    """
    try:
        client = await Client.connect(config.address, namespace=config.namespace)
    except Exception as exc:  # RuntimeError from the Rust core: connection refused etc.
        raise StoreUnavailableError(
            config.url(),
            f"cannot reach the Temporal frontend at {config.address} ({exc}); start one "
            "(`temporal server start-dev --ip 127.0.0.1`) or fix the URL",
        ) from None
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=config.namespace)
        )
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        raise ConfigError(
            f"namespace {config.namespace!r} does not exist on the Temporal frontend at "
            f"{config.address} (from {config.url()}); create it (`temporal operator namespace "
            f"create --namespace {config.namespace} --address {config.address}`) or fix "
            "namespace= in the URL (default: 'default')"
        ) from None
    return client


def make_worker(
    client: Client, app: Any, config: TemporalConfig, *, max_cached_workflows: int = 1000
) -> Worker:
    """A worker for ``app``'s workflows and steps on ``config.task_queue`` (not started).

    Raises:
        ConfigError: another app is already served on that task queue in this process.
    """
    served = SERVED.get(config.task_queue)
    if served is not None and served.registry is not app.registry:
        raise ConfigError(
            f"task queue {config.task_queue!r} is already served by another app in this "
            "process; give each app its own task_queue= in its temporal:// URL"
        )
    if not isinstance(app.clock, WorkflowClock):
        app.clock = WorkflowClock(app.clock)
    SERVED[config.task_queue] = Served(app.registry, config, app.max_claims, app.registry.timeouts)
    return Worker(
        client,
        task_queue=config.task_queue,
        workflows=[SurefootWorkflow],
        activities=[run_step],
        workflow_runner=UnsandboxedWorkflowRunner(),
        # Any exception out of workflow code fails the run (surefoot has turned the ones
        # it knows into clear errors): nothing becomes a workflow task retried forever,
        # including Temporal's own non-determinism error on replay.
        workflow_failure_exception_types=[Exception],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=config.sticky),
        max_cached_workflows=max_cached_workflows,
        graceful_shutdown_timeout=timedelta(seconds=1),
    )


def unserve(app: Any, config: TemporalConfig) -> None:
    """Forget that this process serves ``app`` on ``config.task_queue`` (its worker stopped)."""
    served = SERVED.get(config.task_queue)
    if served is not None and served.registry is app.registry:
        del SERVED[config.task_queue]


async def serve(
    app: Any,
    url: str | None = None,
    *,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``app`` on Temporal until ``stop`` is set (or SIGTERM/SIGINT, when in the main thread).

    Args:
        url: the ``temporal://`` URL (default: the app's).
        ready: called with a line once the worker polls its task queue.
    """
    config = parse_url(url or app.url)
    client = await connect(config)
    worker = make_worker(client, app, config)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    except (RuntimeError, ValueError):  # not the main thread: the caller sets ``stop``
        pass
    try:
        async with worker:
            if ready is not None:
                n = len(app.registered())
                ready(f"surefoot worker on {config.url()} serving {n} workflow(s)")
            await stop.wait()
    finally:
        unserve(app, config)
