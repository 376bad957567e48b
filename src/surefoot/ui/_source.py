"""What the inspector reads and does, on the public API only (the adapter of ``surefoot ui``).

Everything the pages show comes through here: ``durable.App`` (list_runs, show, retry,
cancel, resolve, signal, fork), ``statebus.Store`` (snapshot) and ``statebus.Stream``
(consumers, dead letters, redrive). Where the public API has no call for what a page needs,
the gap is filled here and marked ``API GAP`` so the real call can replace it:

- runs: ``App.list_runs`` (filters, offset, the ``attention`` order), ``App.count_runs``
  and ``App.run_versions``: indexed SQL on every journal backend;
- workers: ``App.workers`` (ids, versions offered, last seen, leases held); stranded runs
  are the waiting runs of versions no live worker offers;
- streams and consumer groups: ``statebus.streams(url)`` lists the streams, one
  ``Stream.stats()`` per stream reads its counts and every group's position, pending, dead
  letters and lag. Looking registers nothing (``Stream.consumer(name)`` registers a group,
  which holds retention back): a group's dead letters come from ``Stream.dead_letters(group)``,
  a read, for the groups ``stats()`` lists. Redrive, an action, opens the consumer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .. import durable, storage
from ..durable.engine import engine_scheme
from ..errors import ConfigError
from ._story import Story, story

__all__ = [
    "Inspector",
    "MarkedAnswer",
    "RunView",
    "RunsPage",
    "RunsQuery",
    "StreamView",
    "StreamsPage",
    "marked_answer",
    "parse_json",
]

NEEDS_ATTENTION = "needs_attention"
WAITING = ("pending", "sleeping")


def parse_json(text: str, what: str) -> Any:
    """``text`` as JSON (empty means null), with the CLI's message when it is not JSON."""
    if text.strip() == "":
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} must be JSON, got {text!r} ({exc}); quote strings: '\"yes\"'"
        ) from None


@dataclass(frozen=True, slots=True)
class RunsQuery:
    """The runs page's filters: state, workflow, version, max age in seconds, id search."""

    state: str = ""
    workflow: str = ""
    version: str = ""
    max_age: float | None = None
    search: str = ""
    page: int = 1
    per_page: int = 50


@dataclass(frozen=True, slots=True)
class RunsPage:
    """One page of runs (needs_attention first, then newest), with the counts per state."""

    rows: list[durable.RunInfo]
    total: int
    counts: dict[str, int]
    all_runs: int
    page: int
    pages: int
    workflows: list[str]
    versions: list[str]


@dataclass(frozen=True, slots=True)
class MarkedAnswer:
    """A run result that is a ``guard.Answer`` derived from untrusted data, not endorsed.

    Attributes:
        text: the answer's text. sources: the untrusted sources it derives from (tainted).
    """

    text: str
    sources: list[str]


_ANSWER_FIELDS = {"text", "label", "marked"}


def marked_answer(value: Any) -> MarkedAnswer | None:
    """``value`` as a marked answer, if it is one (None otherwise).

    A durable run that returns ``CapabilityPolicy.check_answer(...)`` journals the
    ``Answer`` as the codec's tagged object ``{"$sf": "obj", "t":
    "surefoot.guard._capabilities.Answer", "v": {"text", "label", "marked", "withheld"}}``
    (``withheld``: since answers are composed from parts; older journals lack it).
    ``Answer`` is not a registered codec type, so it decodes to a dict with exactly those keys,
    ``label`` decoded to a ``guard.Label`` (a registered type); that shape is what is
    recognised here. Marked: ``marked`` is true or the label has tainted sources (either
    one is enough: a page errs on the side of the warning). An ``Answer`` itself (decoded
    by an app that declares it as the workflow's return type) is recognised too.
    """
    from ..guard import Answer, Label

    if isinstance(value, Answer):
        value = {"text": value.text, "label": value.label, "marked": value.marked}
    if not isinstance(value, dict) or not (
        set(value) == _ANSWER_FIELDS or set(value) == _ANSWER_FIELDS | {"withheld"}
    ):
        return None
    label, text, marked = value["label"], value["text"], value["marked"]
    if not isinstance(label, Label) or not isinstance(text, str):
        return None
    if marked is not True and not label.tainted:
        return None
    return MarkedAnswer(text, sorted(label.tainted or label.untrusted))


@dataclass(frozen=True, slots=True)
class RunView:
    """One run as the run page shows it."""

    detail: durable.RunDetail
    keys: dict[str, str]
    children: list[str]
    undone: list[Any]
    not_undone: list[Any]
    lease_expired: bool
    signals: list[durable.AuditEntry]
    attention: dict[str, Any]
    answer: MarkedAnswer | None = None
    story: Story | None = None


@dataclass(frozen=True, slots=True)
class ConsumerView:
    """A consumer group's counts (``statebus.ConsumerStats``) and its dead letters."""

    name: str
    position: int
    pending: int
    dead: int
    lag: int
    dead_letters: list[Any] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StreamView:
    """A stream's counts (``statebus.StreamStats``) and its consumer groups.

    Attributes:
        missing: consumer groups named with ``--stream`` that this stream does not have.
    """

    name: str
    messages: int
    first_seq: int
    last_seq: int
    trimmed_ids: int
    consumers: list[ConsumerView] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StreamsPage:
    """The streams shown, and the ``--stream`` names the store does not hold."""

    streams: list[StreamView]
    missing: list[str]
    filtered: bool


class Inspector:
    """The inspector's view of one journal, and optionally one store and some streams.

    Args:
        db: the journal URL (as ``surefoot runs --db``).
        store: a statebus storage URL for the shared-state and streams pages.
        namespace: the store namespace to show.
        streams: ``"name"`` or ``"name:group1,group2"``: show only these streams (and
            groups); none shows every stream of the store with every group.
        app: the team's own ``durable.App`` on ``db`` (``surefoot ui --app``): its
            payload codec reads what its runs stored; closed with the inspector.
    """

    def __init__(
        self,
        db: str,
        *,
        store: str | None = None,
        namespace: str = "default",
        streams: tuple[str, ...] = (),
        app: durable.App | None = None,
    ) -> None:
        if engine_scheme(db) is not None:
            raise ConfigError(
                f"the inspector reads surefoot's own journal; runs on {db.partition(':')[0]}:// "
                "live on that engine: look at them in Temporal's own UI (`temporal server "
                "start-dev` serves it on http://127.0.0.1:8233) or with `surefoot engine show "
                "RUN --app MODULE:APP --url URL`"
            )
        self.stream_specs = [_stream_spec(s) for s in streams]
        if self.stream_specs and store is None:
            raise ConfigError("--stream needs --store URL: the storage that holds the streams")
        self.db = storage.redact(db)  # shown on the start line and every page: no secrets
        # after the checks: a refused option leaves nothing open
        self.app = durable.App(db) if app is None else app
        self.store_url = store
        self.namespace = namespace

    def close(self) -> None:
        """Release the journal's connections."""
        self.app.close()

    # -- runs ---------------------------------------------------------------------------

    def runs_page(self, q: RunsQuery, *, now: float) -> RunsPage:
        """Filter, count and page the runs; needs_attention first, then newest first."""
        app = self.app
        filters: dict[str, Any] = {
            "status": q.state or None,
            "workflow": q.workflow or None,
            "version": q.version or None,
            "since": None if q.max_age is None else now - q.max_age,
            "search": q.search.strip() or None,
        }
        counts = app.count_runs()
        all_runs = sum(counts.values())
        filtered = any(v is not None for v in filters.values())
        total = sum(app.count_runs(**filters).values()) if filtered else all_runs
        pages = max(1, -(-total // q.per_page))
        page = min(max(1, q.page), pages)
        rows = app.list_runs(
            **filters, order="attention", offset=(page - 1) * q.per_page, limit=q.per_page
        )
        pairs = app.run_versions()
        return RunsPage(
            rows=rows,
            total=total,
            counts={s: counts.get(s, 0) for s in durable.STATUSES},
            all_runs=all_runs,
            page=page,
            pages=pages,
            workflows=sorted({w for w, _ in pairs}),
            versions=sorted({v for _, v in pairs}),
        )

    def run(self, run_id: str, *, now: float) -> RunView:
        """A run's detail plus what the page derives: keys, fork children, undo lists."""
        d = self.app.show(run_id)
        r = d.run
        keys = {
            s.pos: f"{r.run_id}:{s.pos}"
            for s in d.steps
            if s.kind == "effect" and r.strategy == "journal_keys"
        }
        children = [
            str(a.detail.get("as"))
            for a in d.audit
            if a.action == "fork" and isinstance(a.detail, dict)
        ]
        undone: list[Any] = []
        not_undone: list[Any] = []
        attention: dict[str, Any] = {}
        for a in d.audit:
            if a.action == NEEDS_ATTENTION and isinstance(a.detail, dict):
                attention = a.detail
                undone = list(a.detail.get("undone") or [])
                not_undone = list(a.detail.get("not_undone") or [])
        expired = r.status == "running" and (r.lease_until or 0) < now
        signals = [a for a in d.audit if a.action == "signal"]
        answer = marked_answer(r.result) if r.status == "succeeded" else None
        return RunView(
            d, keys, children, undone, not_undone, expired, signals, attention, answer,
            story(d, now=now),
        )  # fmt: skip

    # -- actions (the CLI's calls, and its messages when one is refused) ----------------

    def retry(self, run_id: str, reason: str) -> str:
        self.app.retry(run_id, reason=reason)
        return f"retried {run_id}: now {self.app.show(run_id).run.status}"

    def cancel(self, run_id: str, reason: str) -> str:
        if not self.app.cancel(run_id, reason=reason):
            raise ConfigError(f"run {run_id!r} has already ended; nothing to cancel")
        return f"cancelled {run_id}: now {self.app.show(run_id).run.status}"

    def resolve(self, run_id: str, step: str, result: str, reason: str) -> str:
        value = parse_json(result, "RESULT")
        self.app.resolve(run_id, step, value, reason=reason)
        return f"resolved step {step} of {run_id}: now {self.app.show(run_id).run.status}"

    def signal(self, run_id: str, name: str, payload: str, signal_id: str) -> str:
        if not name:
            raise ConfigError("a signal needs a name (the one the run's wait_for waits for)")
        value = parse_json(payload, "PAYLOAD")
        sent = self.app.signal(run_id, name, value, signal_id=signal_id or None)
        if not sent:
            return f"signal id {signal_id!r} was already delivered to {run_id}; nothing sent"
        return f"signal {name!r} sent to {run_id} (now {self.app.show(run_id).run.status})"

    def fork(self, run_id: str, step: str, new_id: str) -> tuple[str, str]:
        if not step:
            raise ConfigError("fork needs the step position to run again from, e.g. 3")
        handle = self.app.fork(run_id, step, new_run_id=new_id or None)
        return handle.run_id, f"forked {run_id} at step {step} as {handle.run_id}"

    # -- workers --------------------------------------------------------------------------

    def workers(self, *, now: float) -> dict[str, Any]:
        """The workers seen, live workflow versions, lease holders and stranded runs."""
        app = self.app
        since = now - 3 * app.lease
        workers = app.workers()
        live = {pair for w in workers if w.seen_at >= since for pair in w.workflows}
        holders: dict[str, list[durable.RunInfo]] = {}
        stranded: list[durable.RunInfo] = []
        for r in app.list_runs(status="running", limit=10**9):
            if r.owner:
                holders.setdefault(r.owner, []).append(r)
        for wf, version in app.run_versions():
            if (wf, version) in live:
                continue
            for st in (*WAITING, "running"):
                for r in app.list_runs(status=st, workflow=wf, version=version, limit=10**9):
                    if st != "running" or (r.lease_until or 0) < now:
                        stranded.append(r)
        stranded.sort(key=lambda r: (-r.updated_at, r.run_id))
        return {
            "workers": workers,
            "live": sorted(live),
            "holders": sorted(holders.items()),
            "stranded": stranded,
            "since": since,
        }

    # -- shared state and streams ---------------------------------------------------------

    def state(self) -> list[Any]:
        """Every key of the namespace with value, version, author and trust, by key."""
        if self.store_url is None:
            return []
        from ..statebus import Store

        st = Store(self.store_url, namespace=self.namespace)
        try:
            snap = st.snapshot()
        finally:
            st.close()
        return [snap[k] for k in sorted(snap)]

    def _shown(self, storage: Any) -> tuple[list[str], list[str]]:
        """The stream names to show (listed by the storage, filtered by ``--stream``) and
        the ``--stream`` names it does not hold. Reads only: nothing is opened for a name
        the storage does not list (opening one would make it appear in ``memory://``)."""
        from ..statebus import streams

        held = streams(storage)
        if not self.stream_specs:
            return sorted(held), []
        wanted = list(dict.fromkeys(n for n, _ in self.stream_specs))
        return [n for n in wanted if n in held], [n for n in wanted if n not in held]

    def _groups(self, name: str) -> list[str] | None:
        """The groups ``--stream`` names for stream ``name`` (None: every group)."""
        named = [c for n, cs in self.stream_specs if n == name for c in cs]
        if any(n == name and not cs for n, cs in self.stream_specs):
            return None
        return list(dict.fromkeys(named)) or None

    def _stats(self, storage: Any, name: str) -> tuple[Any, Any, list[str]]:
        """The opened stream, its stats with only the groups shown, and the named groups
        it lacks; one ``stats()`` call, no consumer registered."""
        from dataclasses import replace

        from ..statebus import Stream

        s = Stream(storage, name)
        stats = s.stats()
        groups = self._groups(name)
        if groups is None:
            return s, stats, []
        have = {c.name: c for c in stats.consumers}
        kept = tuple(have[g] for g in groups if g in have)
        return s, replace(stats, consumers=kept), [g for g in groups if g not in have]

    def streams(self) -> StreamsPage:
        """Every stream (or those ``--stream`` names) with its counts, each consumer group's
        position, pending, dead letters and lag, and the dead letters themselves."""
        if self.store_url is None:
            return StreamsPage([], [], False)
        from .. import storage as _storage

        st = _storage.open(self.store_url)
        try:
            names, missing = self._shown(st)
            out = []
            for name in names:
                s, stats, lacking = self._stats(st, name)
                views = [
                    ConsumerView(
                        c.name,
                        c.position,
                        c.pending,
                        c.dead,
                        c.lag,
                        s.dead_letters(c.name) if c.dead else [],
                    )
                    for c in stats.consumers
                ]
                out.append(
                    StreamView(
                        name,
                        stats.messages,
                        stats.first_seq,
                        stats.last_seq,
                        stats.trimmed_ids,
                        views,
                        lacking,
                    )
                )
            return StreamsPage(out, missing, bool(self.stream_specs))
        finally:
            st.close()

    def metrics(self, *, now: float) -> str:
        """``surefoot.telemetry.prometheus_text`` over this journal and the shown streams
        (one ``stats()`` per stream; no consumer registered)."""
        from .. import telemetry

        stats: list[Any] = []
        if self.store_url is not None:
            from .. import storage as _storage

            st = _storage.open(self.store_url)
            try:
                for name in self._shown(st)[0]:
                    stats.append(self._stats(st, name)[1])
            finally:
                st.close()
        journal = self.app.existing_journal()  # looking creates no journal
        return telemetry.prometheus_text(journal=journal, streams=stats, now=now)

    def redrive(self, stream: str, consumer: str, seqs: list[int] | None) -> str:
        """Put dead letters back for delivery (all of the group's, or those in ``seqs``)."""
        if self.store_url is None:
            raise ConfigError("redrive needs --store URL: the storage that holds the streams")
        from .. import storage as _storage
        from ..statebus import Stream

        st = _storage.open(self.store_url)
        try:
            names, _ = self._shown(st)
            groups = [] if stream not in names else self._stats(st, stream)[1].consumers
            if consumer not in {c.name for c in groups}:
                raise ConfigError(
                    f"stream {stream!r} has no consumer group {consumer!r} this inspector "
                    "shows; nothing was redriven (the Streams page lists the groups)"
                )
            n = Stream(st, stream).consumer(consumer).redrive(seqs)
        finally:
            st.close()
        return f"redrove {n} dead letter{'s' if n != 1 else ''} of {stream}/{consumer}"


def _stream_spec(text: str) -> tuple[str, list[str]]:
    name, colon, rest = text.partition(":")
    consumers = [c.strip() for c in rest.split(",") if c.strip()]
    if not name or (colon and not consumers):
        raise ConfigError(
            f"--stream must look like 'NAME' or 'NAME:GROUP[,GROUP…]', got {text!r}; "
            "it shows only that stream (and those consumer groups)"
        )
    return name, consumers
