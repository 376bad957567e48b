"""``App``: registers steps and workflows, starts runs, and manages them."""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .. import codec, storage
from ..clock import Clock, ServerClock, SystemClock, server_clock_for
from ..clock import seconds as _secs
from ..errors import ConfigError, UnknownRunError
from ..storage.journal import Journal
from ._coded import wrap
from ._crash import CrashPlan
from ._delegate import PartMethod
from ._exists import ReadingHost, check_exists, check_readable
from ._handle import RunHandle
from ._manage import Operations
from ._newrun import NewRuns, RunOptions
from ._payloads import DEFAULT_CHUNK_AT, check_chunk_at, check_codec
from ._registry import Registry
from ._runner import Executor
from ._step import make_step
from ._tokens import Batching, TokenHub
from ._types import STRATEGIES, WAIT_SEP, StepSpec
from ._versions import Workflow, describe
from ._waits import sleep_step, wait_step
from ._workload import Workload
from .engine import Engine, engine_scheme, open_engine

__all__ = ["App"]

F = TypeVar("F", bound=Callable[..., Any])


def _positive(value: float, name: str) -> float:
    out = _secs(value, name)
    if out <= 0:
        raise ConfigError(f"{name} must be > 0 seconds, got {value!r}")
    return out


def _flag(value: bool, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


def _max_claims(value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(
            f"max_claims must be an int >= 1, got {value!r}; it bounds how often one run is "
            "claimed again after its worker died (default 10)"
        )
    return value


class App:
    """A durable-execution app: its steps, its workflows and the journal they use.

    It is a facade over its parts, each given what it needs: the ``registry`` (what it
    declared), the ``executor`` (runs executing here), ``new_runs`` (making and creating
    runs) and run management (``list_runs``, ``show``, ``cancel``, …).

    Args:
        url: the journal's storage URL (``sqlite:///runs.db``; ``sqlite://`` is a fresh
            temporary file). Opened on first use; ``configure(url=…)`` may change it first.
        clock: the clock for timers, leases and step timings (``FakeClock`` in tests).
        strategy: the default recovery strategy for new runs: ``journal_keys`` (default),
            ``journal`` or ``restart``.
        lease: seconds a worker holds a run without renewing it; heartbeats renew every
            ``lease / 3``. A run whose lease expired is resumed by any worker.
        poll: seconds between checks while waiting (``result()``, idle workers).
        worker_id: this app's name in leases and the audit log (default ``host:pid:random``,
            unique per app). A worker restarted with the same id takes its runs back at once.
        crash: a ``CrashPlan`` for tests and the lab (default: ``SUREFOOT_CRASH``).
        max_claims: claims of one run, since it last suspended or an operator moved it,
            after which a worker sends it to ``needs_attention`` instead of running it
            again (a run that kills its worker every time is not retried forever).
        create: make the journal if it does not exist (default). ``create=False`` opens
            only an existing journal: a missing SQLite file, a file or PostgreSQL schema
            without a durable journal, or ``sqlite://`` is a ``ConfigError`` when the
            journal is first opened, and nothing is created (for workers, which should
            never start an empty journal of their own at a mistyped path).
        payload_codec: a ``PayloadCodec`` (``durable.ZlibCodec()``, or your own that
            encrypts with your key) applied to every value the journal stores; every
            process reading the journal needs the same one.
        value_chunks: step results of at least this many characters of JSON (default
            8192) are stored as content-addressed chunks shared between the run's steps,
            so a step returning the previous step's list plus a few items adds only those
            items' bytes (SQL journals; docs/durable.md, "Large values"). ``None`` keeps
            every value in its row. Chunked values are read back whatever this is set to.
        stream_batching: when what steps emit (``durable.emit``, a provider's
            ``stream()``) is written to the run's token stream: a ``Batching`` (default 64
            events or 0.05 s, whichever first; docs/streams.md).

    Raises:
        ConfigError: an unknown strategy, a bad duration or ``max_claims`` < 1.
    """

    def __init__(
        self,
        url: str = "sqlite://",
        *,
        clock: Clock | None = None,
        strategy: str = "journal_keys",
        lease: float = 10.0,
        poll: float = 0.2,
        worker_id: str | None = None,
        crash: CrashPlan | None = None,
        max_claims: int = 10,
        create: bool = True,
        payload_codec: Any = None,
        value_chunks: int | None = DEFAULT_CHUNK_AT,
        stream_batching: Batching | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
        self.url = url
        self.clock: Clock = clock or SystemClock()
        self.strategy = strategy
        self.lease = _positive(lease, "lease")
        self.poll = _secs(poll, "poll")
        self.max_claims = _max_claims(max_claims)
        self.create = _flag(create, "create")
        self.payload_codec = check_codec(payload_codec)
        self.value_chunks = check_chunk_at(value_chunks)
        # Unique per app object: two apps in one process must not mistake each other's runs
        # for their own. A stable id (worker_id=…) lets a restarted worker take its runs back.
        unique = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.worker_id = worker_id or unique
        self.crash = crash if crash is not None else CrashPlan.from_env()
        self._storage: storage.Storage | None = None
        self._journal: Journal | None = None
        self._open_lock = threading.Lock()
        if stream_batching is not None and not isinstance(stream_batching, Batching):
            raise ConfigError(
                f"stream_batching must be a durable.Batching(max_events=, max_delay=) or "
                f"None, got {stream_batching!r}"
            )
        self.tokens = TokenHub(
            self._open_stream,
            stream_batching or Batching(),
            codec=self.payload_codec,
            url=storage.redact(url),
        )
        self.registry = Registry()
        self.executor = Executor(self.registry, self)
        self.new_runs = NewRuns(self.registry, self)
        self._ops = Operations(ReadingHost(self))  # looking at runs creates no journal
        self._work = Workload(self)
        self.serving = False
        self._engine: Engine | None = None  # an engine URL's (temporal://…), opened on use

    # -- configuration -----------------------------------------------------------------

    def configure(
        self,
        *,
        url: str | None = None,
        lease: float | None = None,
        poll: float | None = None,
        worker_id: str | None = None,
        max_claims: int | None = None,
        create: bool | None = None,
    ) -> None:
        """Change settings before the journal is opened (the CLI's ``--db`` and friends).

        Raises:
            ConfigError: a new URL after the journal was opened.
        """
        if url is not None and url != self.url:
            if self._journal is not None or self._engine is not None:
                raise ConfigError(
                    f"this app already uses {storage.redact(self.url)!r}; configure(url=…) "
                    "must come before the first run"
                )
            self.url = url
        if lease is not None:
            self.lease = _positive(lease, "lease")
        if poll is not None:
            self.poll = _secs(poll, "poll")
        if worker_id is not None:
            self.worker_id = worker_id
        if max_claims is not None:
            self.max_claims = _max_claims(max_claims)
        if create is not None:
            self.create = _flag(create, "create")

    @property
    def journal(self) -> Journal:
        """The journal (opened on first use).

        Raises:
            ConfigError / StoreUnavailableError / SchemaVersionError: the URL cannot be used
                (or, with ``create=False``, names no existing journal).
        """
        j = self._journal
        if j is None:
            if engine_scheme(self.url) is not None:
                raise ConfigError(
                    f"this app runs on an engine ({storage.redact(self.url)}), not on a "
                    "journal: its runs live there (see docs/engines.md for how to look at "
                    "them); start, signal and wait for them with app.start / app.signal / "
                    "handle.result"
                )
            with self._open_lock:
                if self._journal is None:
                    if not self.create:
                        check_exists(self.url)
                    st = storage.open(self.url)
                    # On PostgreSQL leases are judged on the database's clock (a real
                    # clock only: a FakeClock keeps driving time); reopened, the new
                    # storage's (the old one's connection closed with it).
                    real = isinstance(self.clock, ServerClock)
                    self.clock = server_clock_for(SystemClock() if real else self.clock, st)
                    # compress/encrypt stored values, chunk large ones (see _payloads)
                    j = wrap(st.journal(), self.payload_codec, self.value_chunks)
                    self._journal = j
                    self._storage = st
                j = self._journal
        assert j is not None
        return j

    def existing_journal(self) -> Journal:
        """The journal, for reading and managing runs: a URL that holds no journal yet is
        refused with one line, and nothing is created (``journal`` would create it).

        Raises:
            ConfigError: no journal at this URL (see ``journal`` for the other errors).
        """
        if self._journal is None and engine_scheme(self.url) is None:
            (check_readable if self.create else check_exists)(self.url)
        return self.journal

    def _open_stream(self, name: str) -> Any:
        """The stream ``name`` in the journal's storage (token streams, ``_tokens.py``)."""
        self.journal  # noqa: B018 - opens the storage
        assert self._storage is not None
        return self._storage.stream(name)

    def close(self) -> None:
        """Stop executing runs here and close the journal. Runs in flight stay resumable."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        self.executor.close()
        self.tokens.close()
        if self._journal is not None:
            self._journal.close()  # its liveness locks and wake-up listeners
        if self._storage is not None:
            self._storage.close()
        self._storage = None
        self._journal = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"App({storage.redact(self.url)!r}, strategy={self.strategy!r})"

    # -- registration ------------------------------------------------------------------

    @overload
    def step(self, fn: F, /) -> F: ...
    @overload
    def step(
        self,
        *,
        effect: bool = False,
        compensate: Callable[..., Any] | None = None,
        retry: Any = None,
        compensate_retry: Any = 3,
        idempotent: bool = False,
        name: str | None = None,
    ) -> Callable[[F], F]: ...

    def step(
        self,
        fn: Any = None,
        *,
        effect: bool = False,
        compensate: Callable[..., Any] | None = None,
        retry: Any = None,
        compensate_retry: Any = 3,
        idempotent: bool = False,
        name: str | None = None,
    ) -> Any:
        """Declare a step: its result is journalled and never recomputed after a crash.

        ``@app.step`` is a pure step (a model call, a read). ``@app.step(effect=True)``
        changes the world: it gets ``key=f"{run_id}:{pos}"`` if it accepts a ``key``
        argument, an intent row is committed before it runs, and ``compensate`` undoes it
        when the run fails (called with the effect's arguments, plus ``key=`` and
        ``result=`` if it accepts them). Sync and async functions both work.

        Args:
            effect: the step acts on the outside world.
            compensate: undoes the effect (sagas).
            retry: attempts for the step: None (1), an int, or a ``RetryPolicy``.
            compensate_retry: attempts for the compensation (default 3).
            idempotent: the effect may be rerun safely even without a key.
            name: the journalled name (default: the function name).

        Raises:
            ConfigError: ``compensate`` on a pure step, or a name registered twice.
        """

        def register(f: Any) -> Any:
            sd = self.registry.add_step(
                f,
                name=name,
                effect=effect,
                compensate=compensate,
                retry=retry,
                compensate_retry=compensate_retry,
                idempotent=idempotent,
            )
            return make_step(sd)

        return register(fn) if fn is not None else register

    @overload
    def workflow(self, fn: Callable[..., Any], /) -> Workflow: ...
    @overload
    def workflow(
        self, *, version: str = "1", name: str | None = None, timeout: float | None = None
    ) -> Callable[[Callable[..., Any]], Workflow]: ...

    def workflow(
        self,
        fn: Any = None,
        *,
        version: str = "1",
        name: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Declare a workflow: orchestration code that calls steps, sleeps and waits.

        Several versions of one name may be registered at once: a run finishes on the
        version it began with; new runs of a name use the version registered last.

        Args:
            version: the version label stored in every run's header.
            name: the workflow's name (default: the function name); give
                the same name to each version's function.
            timeout: seconds from a run's start after which it stops at its next step
                or wait with ``DeadlineExceededError`` (its compensations run); ``start``
                and ``enqueue`` may give their own.

        Raises:
            ConfigError: the same name and version registered twice.
        """

        def register(f: Callable[..., Any]) -> Workflow:
            wf = self.registry.add_workflow(f, name=name, version=str(version))
            if timeout is not None:
                self.registry.timeouts[wf.name, wf.version] = _positive(timeout, "timeout")
            return wf

        return register(fn) if fn is not None else register

    def registered(self) -> list[tuple[str, str]]:
        """(name, version) of every workflow registered here."""
        return self.registry.registered()

    def served_queues(self) -> list[str]:
        """The named queues declared here (a worker of this app claims their runs)."""
        return self.registry.queues.names()

    def describe(self, workflow: Workflow | str) -> list[StepSpec]:
        """Each step of ``workflow`` as pure, effect or wait, with its compensation and key plan."""
        return describe(self.registry.resolve(workflow))

    # -- waits (inside workflows) ------------------------------------------------------

    def sleep(
        self,
        seconds: float | dt.timedelta = 0.0,
        *,
        minutes: float = 0.0,
        hours: float = 0.0,
        days: float = 0.0,
    ) -> Any:
        """Durable timer: the run suspends (no worker held) and resumes after the delay.

        ``await app.sleep(hours=24)`` in async workflows; ``app.sleep(5)`` in sync ones.
        """
        total = _secs(seconds, "sleep") + 60 * minutes + 3600 * hours + 86400 * days
        return sleep_step(self.clock.now() + total)

    def sleep_until(self, when: float | dt.datetime) -> Any:
        """Durable timer until ``when`` (clock seconds, or an aware datetime)."""
        at = when.timestamp() if isinstance(when, dt.datetime) else float(when)
        return sleep_step(at)

    def wait_for(
        self,
        name: str,
        *,
        timeout: float | None = None,
        default: Any = None,
        type: Any = Any,
    ) -> Any:
        """Suspend the run until ``app.signal(run_id, name, payload)``; return the payload.

        Each signal is delivered exactly once (consumed in the same transaction that
        journals this step). After ``timeout`` seconds with no signal, returns ``default``.

        Args:
            type: the payload's type (``type=Approval``, ``type=list[Finding]``): the payload
                is read back from the journal as that type, on every replay alike. Without
                it the payload comes back as decoded JSON (a dataclass as the dict of its
                fields unless its class was registered with ``codec.register``).

        Raises:
            ConfigError: ``name`` is not a non-empty string, or contains the character
                ``\\x1f`` (it separates names in the run header).
            UnsupportedTypeError: ``type`` cannot be rebuilt from JSON safely.
            DecodeError: the payload does not fit ``type``.
        """
        if not isinstance(name, str) or not name or WAIT_SEP in name:
            raise ConfigError(
                f"wait_for() needs a non-empty signal name without '\\x1f', got {name!r}"
            )
        t = None if timeout is None else _secs(timeout, "timeout")
        if type is not Any:
            codec.check_annotation(type, where=f"wait_for({name!r})")
        return wait_step(name, t, default, type)

    # -- starting runs -----------------------------------------------------------------

    def start(
        self,
        workflow: Workflow | str,
        *args: Any,
        run_id: str | None = None,
        strategy: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> RunHandle:
        """Start a run and execute it in this process; return its handle at once.

        Starting the same ``run_id`` again returns the same run (and resumes it here if
        it was abandoned); other arguments for an existing ``run_id`` are an error.

        Raises:
            RunConflictError: ``run_id`` exists with another workflow or other arguments.
            EncodeError: an argument cannot be stored (nothing written).
            WorkflowNotFoundError: ``workflow`` is not registered.
        """
        wf = self.registry.resolve(workflow)
        eng = self._engine_now()
        if eng is not None:  # e.g. temporal://: that engine runs it (a worker here too)
            _engine_refuses(eng, strategy=strategy)
            return eng.start(wf, args, kwargs, run_id=run_id, here=True, timeout=timeout)
        opts = RunOptions(strategy=strategy, embedded=True, timeout=timeout)
        row, created = self.new_runs.create(wf, args, kwargs, run_id, opts)
        if created:
            return RunHandle(
                self, row.run_id, drive=True, future=self.executor.submit(row.run_id, 1, row)
            )
        return RunHandle(self, row.run_id, drive=True, future=self.executor.drive(row))

    def enqueue(
        self,
        workflow: Workflow | str,
        *args: Any,
        run_id: str | None = None,
        strategy: str | None = None,
        queue: Any = None,
        priority: int = 0,
        dedup_id: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> RunHandle:
        """Record a pending run for workers (``surefoot worker``); return its handle.

        ``queue`` (a ``Queue`` from ``app.queue`` or its name): the run starts only within
        the queue's limits, by ``priority`` (lower first), then age. ``dedup_id``: while
        an unfinished run of the queue holds it, enqueuing again returns that run's
        handle. ``timeout``: the run's deadline, in seconds from now (see App.workflow).

        Raises:
            RunConflictError / EncodeError / WorkflowNotFoundError: as for ``start``.
        """
        wf = self.registry.resolve(workflow)
        eng = self._engine_now()
        if eng is not None:
            _engine_refuses(
                eng, strategy=strategy, queue=queue, priority=priority, dedup_id=dedup_id
            )
            return eng.start(wf, args, kwargs, run_id=run_id, here=False, timeout=timeout)
        opts = RunOptions(
            strategy=strategy, queue=queue, priority=priority, dedup_id=dedup_id, timeout=timeout
        )
        row, _ = self.new_runs.create(wf, args, kwargs, run_id, opts)
        return RunHandle(self, row.run_id, drive=False)

    def handle(self, run_id: str) -> RunHandle:
        """A handle that watches an existing run (from any process).

        Raises:
            UnknownRunError: no such run.
        """
        eng = self._engine_now()
        if eng is not None:
            return eng.handle(run_id)
        if self.existing_journal().get_run(run_id) is None:  # looking creates no journal
            raise UnknownRunError(run_id, self.url)
        return RunHandle(self, run_id, drive=False)

    # -- another engine (temporal://…) -------------------------------------------------

    def _engine_now(self) -> Engine | None:
        """The engine this app's URL names (opened on first use), or None for a journal."""
        if self._engine is None and engine_scheme(self.url) is not None:
            with self._open_lock:
                if self._engine is None:
                    self._engine = open_engine(self)
        return self._engine

    # -- queues, children, schedules, patches, retention (._workload) ----------------

    queue = PartMethod("_work", Workload.queue)
    queues = PartMethod("_work", Workload.queues)
    child = PartMethod("_work", Workload.child)
    patched = PartMethod("_work", Workload.patched)
    schedule = PartMethod("_work", Workload.schedule)
    fire_schedules = PartMethod("_work", Workload.fire_schedules)
    prune = PartMethod("_work", Workload.prune)

    # -- run management (._manage) ----------------------------------------------------

    def signal(
        self, run_id: str, name: str, payload: Any = None, *, signal_id: str | None = None
    ) -> bool:
        """Deliver signal ``name`` to a run; its ``wait_for(name)`` gets ``payload`` once.

        A signal for a run that is not (yet) waiting for ``name`` is kept until a
        ``wait_for(name)`` takes it; one for a run that has ended is refused. A delivered
        signal is recorded in the audit log (``signal``, with its name and id).

        Returns:
            True if it was queued; False if ``signal_id`` was delivered before (nothing
            changed).

        Raises:
            UnknownRunError: no such run.
            JournalError: the run has ended (succeeded, failed or cancelled): no wait will
                ever receive the signal; nothing is stored. (A ``signal_id`` delivered
                before it ended returns False instead: sending it again is harmless.)
            EncodeError: the payload cannot be stored.
        """
        eng = self._engine_now()
        if eng is not None:  # through that engine, with the same once-per-signal_id rule
            return eng.signal(run_id, name, payload, signal_id)
        return self._ops.signal(run_id, name, payload, signal_id=signal_id)

    list_runs = PartMethod("_ops", Operations.list_runs)
    count_runs = PartMethod("_ops", Operations.count_runs)
    run_versions = PartMethod("_ops", Operations.run_versions)
    workers = PartMethod("_ops", Operations.workers)
    show = PartMethod("_ops", Operations.show)
    resume = PartMethod("_ops", Operations.resume)
    cancel = PartMethod("_ops", Operations.cancel)
    retry = PartMethod("_ops", Operations.retry)
    resolve = PartMethod("_ops", Operations.resolve)
    fork = PartMethod("_ops", Operations.fork)
    stranded = PartMethod("_ops", Operations.stranded)


def _engine_refuses(eng: Any, *, strategy: str | None = None, **options: Any) -> None:
    """Queues, priorities and dedup ids live in surefoot's own journal, and an engine
    replays runs its own way: an engine URL (temporal://…) cannot honour them, so asking
    for one is an error, not a silently ignored option (docs/engines.md)."""
    name = getattr(eng, "name", None) or type(eng).__name__
    if strategy is not None and strategy not in STRATEGIES:
        raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    if strategy not in (None, "journal_keys"):
        raise ConfigError(
            f"strategy={strategy!r} is not supported on {name}: it replays a run from its "
            "own history, as strategy 'journal_keys' does (completed steps never run again, "
            "keys stay the same); drop strategy= or run on sqlite:// or postgresql://"
        )
    given = sorted(k for k, v in options.items() if v not in (None, 0, False))
    if given:
        raise ConfigError(
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} not supported on "
            f"{name} yet (they are kept in surefoot's own journal); "
            "run on sqlite:// or postgresql://, or drop the option"
        )
