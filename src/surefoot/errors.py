"""Every exception surefoot raises, grouped by what the caller can do about it.

::

    SurefootError
    ├── ConfigError                 bad parameter or URL (also ValueError)
    │   └── UnsupportedTypeError        an annotation the codec cannot rebuild values of safely
    ├── EncodeError                 a value the JSON codec cannot store (also TypeError)
    ├── DecodeError                 stored data does not fit its annotation (also TypeError)
    ├── MissingExtraError           an optional driver is not installed (also ImportError)
    ├── TimeoutError_               one attempt ran past its per-attempt timeout (also TimeoutError)
    ├── InvalidReplyError           a model's reply failed the caller's check (also ValueError)
    ├── RecordedError               an error read back from a journal whose type is not importable
    ├── CircuitOpenError            the breaker refused the call; try later or fall back
    ├── IdempotencyError
    │   ├── IdempotencyConflictError    a key reused with different arguments
    │   └── IdempotencyInProgressError  the key's action is running elsewhere
    ├── StoreError
    │   ├── StoreUnavailableError       the database cannot be reached or opened
    │   │   └── OutcomeUnknownError         a write's answer was lost and could not be found out
    │   ├── SchemaVersionError          foreign database, or one written by a newer surefoot
    │   ├── CorruptionError             stored data failed its checksum; refused, not served
    │   └── ValueTooLargeError          a value over the store's max_value_bytes (also ValueError)
    ├── JournalError
    │   ├── StepMismatchError           replay met a different step than was journalled
    │   ├── RunConflictError            a run id reused with other arguments or workflow
    │   ├── UnknownRunError             no run with that id (also KeyError)
    │   ├── WorkflowNotFoundError       no registered workflow of that name and version
    │   ├── LeaseLostError              another worker took the run over; this one must stop
    │   ├── NondeterminismError         workflow code used the clock, random or I/O (Temporal)
    │   ├── RunFailedError              the awaited run ended failed, cancelled or needing attention
    │   └── DeadlineExceededError       a run (or one wait in it) passed its deadline
    └── StateError
        ├── ConflictError               a versioned write met a newer version
        ├── CompactedError              a revision asked for was removed by compaction
        ├── SchemaViolationError        a value does not match its key's schema (also ValueError)
        ├── DuplicateMessageError       a message id reused with a different payload
        ├── ScopeError                  a key outside the agent's scope (also PermissionError)
        └── TrustError                  untrusted data reached a place that needs endorsement

Facts are attributes, so nobody has to parse a message. Every message says what went
wrong, gives the value, and says what to do.
"""

from __future__ import annotations

from typing import Any, Literal

from .redaction import redact_url


class SurefootError(Exception):
    """Root of every error surefoot raises on purpose."""


class ConfigError(SurefootError, ValueError):
    """A parameter, URL or setting is invalid. The message names the value and the fix."""


class EncodeError(SurefootError, TypeError):
    """A value cannot be encoded by the JSON codec; nothing was written.

    Attributes:
        type_name: the qualified name of the offending type.
        path: where in the value it was found, like ``$.items[2]``.
        where: what was being encoded (a step name, a key), when known.
    """

    def __init__(self, type_name: str, path: str, where: str | None = None) -> None:
        self.type_name = type_name
        self.path = path
        self.where = where
        at = f" in {where}" if where else ""
        super().__init__(
            f"cannot encode a value of type {type_name} at {path}{at}: surefoot stores JSON "
            "(with dataclasses, pydantic models, datetimes and bytes). Return plain data, "
            "or a dataclass registered with surefoot.codec.register()."
        )


class UnsupportedTypeError(ConfigError):
    """An annotation names a type the codec cannot rebuild from JSON safely.

    Raised when a function is decorated (or a value is read) with such an annotation,
    instead of handing back a different type later.

    Attributes:
        annotation: the annotation refused, as text.
        path: where inside it, like ``Finding.owner`` or ``[...]`` (``""`` at the top).
        reason: why that part cannot be rebuilt.
        where: what it annotates (a step, a workflow), when known.
    """

    def __init__(self, annotation: str, path: str, reason: str, where: str | None = None) -> None:
        self.annotation = annotation
        self.path = path
        self.reason = reason
        self.where = where
        inside = f" (at {path})" if path else ""
        at = f" in {where}" if where else ""
        super().__init__(
            f"cannot rebuild values of {annotation}{inside}{at} from JSON safely: {reason}. "
            "Annotate a dataclass, a pydantic model, a NamedTuple, an enum, a datetime, bytes, "
            "a plain JSON type or a list/tuple/set/dict/Optional of these; or annotate Any "
            "to get the value as decoded."
        )


class DecodeError(SurefootError, TypeError):
    """Stored data does not match the annotation it is read as; no value is handed back.

    Attributes:
        annotation: the expected type, as text.
        path: where in the value, like ``$.items[2]``.
        got: the type of the stored data found there.
        where: what was being read (a step, a workflow result), when known.
    """

    def __init__(
        self, annotation: str, path: str, got: str, reason: str, where: str | None = None
    ) -> None:
        self.annotation = annotation
        self.path = path
        self.got = got
        self.where = where
        at = f" in {where}" if where else ""
        super().__init__(
            f"stored data at {path}{at} is {got}, which cannot be read as {annotation}: "
            f"{reason}. If the type changed since the value was stored, keep the old shape "
            "readable (a Union of old and new, a default for a new field) or annotate Any."
        )


class MissingExtraError(SurefootError, ImportError):
    """An optional dependency is missing; the message names the extra to install.

    Attributes:
        extra: the extra's name (``postgres``).
        distribution: whose extra it is: ``surefoot``, or a distribution built on it (the
            lab's ``surefoot-lab``).
    """

    def __init__(self, extra: str, purpose: str, *, distribution: str = "surefoot") -> None:
        self.extra = extra
        self.distribution = distribution
        super().__init__(f"install {distribution}[{extra}] to use {purpose}")


# The trailing underscore avoids shadowing the builtin TimeoutError, which it also subclasses.
class TimeoutError_(SurefootError, TimeoutError):
    """One attempt ran longer than ``timeout_per_attempt``.

    Attributes:
        timeout: the limit in seconds.
    """

    def __init__(self, timeout: float, message: str | None = None) -> None:
        self.timeout = timeout
        super().__init__(message or f"attempt exceeded its timeout of {timeout:g} s")


class InvalidReplyError(SurefootError, ValueError):
    """A model's reply was empty or failed the JSON schema / pydantic model the caller declared.

    Raised inside an attempt, so the retry policy (and its budget) retries it like a
    transient error; when attempts run out it is the error the caller sees, with the last
    invalid reply attached.

    Attributes:
        reason: why the reply was refused (the schema's complaint, naming the path).
        text: the reply's text. reply: the whole reply (``ChatCompletion``), when known.
        model: the model that answered.
    """

    def __init__(self, reason: str, text: str = "", model: str = "", reply: Any = None) -> None:
        self.reason = reason
        self.text = text
        self.model = model
        self.reply = reply
        shown = text if len(text) <= 200 else text[:200] + "…"
        super().__init__(
            f"model {model!r} replied {shown!r}, which was refused: {reason}. Make the prompt "
            "ask for exactly that shape, loosen the schema, or raise max_attempts."
        )


class RecordedError(SurefootError):
    """An error decoded from storage whose original type cannot be rebuilt safely.

    Attributes:
        type_name: the original type, as ``module.QualName``.
        message: the original ``str(error)``.
    """

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        self.message = message
        super().__init__(f"{type_name}: {message}")


class CircuitOpenError(SurefootError):
    """The circuit breaker is open and refused the call without making it.

    Attributes:
        name: the breaker's name.
        retry_after: seconds until the breaker lets a probe through.
    """

    def __init__(self, name: str, retry_after: float) -> None:
        self.name = name
        self.retry_after = retry_after
        super().__init__(
            f"circuit {name!r} is open; it lets a probe through in {retry_after:.3g} s. "
            "Use a fallback, or retry after that."
        )


class IdempotencyError(SurefootError):
    """Base of idempotency-key errors. ``key`` names the key."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


class IdempotencyConflictError(IdempotencyError):
    """An idempotency key was reused with different arguments, or by another action."""


class IdempotencyInProgressError(IdempotencyError):
    """The action for this key is running in another process or thread."""


class StoreError(SurefootError):
    """Base of storage errors. ``url`` names the store (without its password)."""

    def __init__(self, url: str, message: str) -> None:
        self.url = redact_url(url)
        super().__init__(message)


class StoreUnavailableError(StoreError):
    """The database cannot be reached, opened or read."""


class OutcomeUnknownError(StoreUnavailableError):
    """A write was sent, the connection broke before its answer came, and surefoot could
    not find out whether it was applied (the old session could not be confirmed gone, or
    the write carries nothing to recognise it by). Read the current state before writing
    again. Where surefoot can find out, it does, and this is not raised."""


class SchemaVersionError(StoreError):
    """The database is foreign, or was written by a newer surefoot; it was not touched."""


class CorruptionError(StoreError):
    """Stored data failed its check (a row's checksum, a chunk's content hash, a ``-wal``
    frame's checksum): the file was damaged after it was written. The data was refused,
    never returned. ``where`` names what was damaged (a table and run and position, or a
    file and frame). Not transient: retrying reads the same bytes. Restore the file from a
    backup (see docs/reliability.md, section 4)."""

    def __init__(self, url: str, where: str, message: str) -> None:
        self.where = where
        super().__init__(url, message)


class ValueTooLargeError(StoreError, ValueError):
    """A value (a key's, a message's, a step's) is larger than the store's limit; nothing
    was written. ``what`` names it, ``size`` and ``limit`` are bytes of UTF-8 JSON."""

    def __init__(self, url: str, what: str, size: int, limit: int) -> None:
        self.what = what
        self.size = size
        self.limit = limit
        super().__init__(
            url,
            f"{what} is {size:,} bytes of JSON, over the limit of {limit:,} bytes of "
            f"{redact_url(url)!r}; nothing was written. Keep large data elsewhere (a file or an "
            "object store) and store its name, or raise the limit with ?max_value_bytes=N in the "
            "storage URL (?max_value_bytes=0: no limit).",
        )


class JournalError(SurefootError):
    """Base of durable-execution errors."""


class StepMismatchError(JournalError):
    """Replay met a different step than the journal recorded at that position."""

    def __init__(self, run_id: str, step: int | str, recorded: str, current: str) -> None:
        self.run_id = run_id
        self.step = step
        self.recorded = recorded
        self.current = current
        super().__init__(
            f"run {run_id!r} step {step} was recorded as {recorded!r} but the code now calls "
            f"{current!r}. The workflow changed while this run was in flight; finish it with "
            "the old code (keep the old version registered) or start a new run id."
        )


class RunConflictError(JournalError):
    """A run id is already taken by a run with other arguments or another workflow."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(message)


class UnknownRunError(JournalError, KeyError):
    """No run has this id in this journal (or on this engine).

    ``hint`` replaces the pointer to ``surefoot runs list`` (an engine's runs are listed
    elsewhere)."""

    def __init__(self, run_id: str, url: str = "", *, hint: str | None = None) -> None:
        self.run_id = run_id
        where = f" in {redact_url(url)}" if url else ""
        see = hint or "list runs with `surefoot runs list --db URL`"
        super().__init__(f"no run with id {run_id!r}{where}; {see}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class WorkflowNotFoundError(JournalError):
    """No workflow of that name (and version) is registered with this app."""


class LeaseLostError(JournalError):
    """Another worker holds the run now (a higher lease epoch); this worker's write was refused."""

    def __init__(self, run_id: str, epoch: int) -> None:
        self.run_id = run_id
        self.epoch = epoch
        super().__init__(
            f"run {run_id!r}: this worker's lease (epoch {epoch}) was taken over by another "
            "worker, so its write was refused. Nothing to do: the other worker continues the run."
        )


class NondeterminismError(JournalError):
    """Workflow code did something a replay would not do the same way (on Temporal).

    An engine that replays the workflow function from its history (Temporal) needs the
    function to take the same path every time: the clock, random numbers and I/O belong in
    steps. Raised in the workflow's code at the call; the run then fails with it.

    Attributes:
        run_id: the run. workflow: its workflow. call: what was called (``time.time``).
    """

    def __init__(self, run_id: str, workflow: str, call: str, hint: str) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.call = call
        super().__init__(
            f"run {run_id!r}: workflow {workflow!r} called {call} in its own code. On "
            f"Temporal the workflow function is replayed from its history, so it must take "
            f"the same path every time: {hint}. Nothing was retried; the run failed."
        )


class RunFailedError(JournalError):
    """The awaited run ended without a result.

    Attributes:
        run_id: the run.
        status: its final status (failed, cancelled, needs_attention).
        error: the recorded error, as data (type and message), if any.

    ``hint`` replaces the pointer to ``surefoot runs show`` (an engine's runs are shown
    elsewhere).
    """

    def __init__(
        self, run_id: str, status: str, error: Any = None, *, hint: str | None = None
    ) -> None:
        self.run_id = run_id
        self.status = status
        self.error = error
        detail = f": {error}" if error else ""
        see = hint or f"See `surefoot runs show {run_id} --db URL`."
        super().__init__(f"run {run_id!r} ended {status}{detail}. {see}")


class DeadlineExceededError(JournalError):
    """A run passed its deadline (``timeout=`` from its start, or one wait's ``timeout``).

    Raised inside the run at its next step or wait; unless the workflow catches it, the run
    ends ``failed`` with this error, after its compensations ran.

    Attributes:
        run_id: the run. deadline: the clock time it passed. what: "run" or the wait.
    """

    def __init__(self, run_id: str, deadline: float, what: str = "run") -> None:
        self.run_id = run_id
        self.deadline = deadline
        self.what = what
        super().__init__(
            f"run {run_id!r}: {what} passed its deadline (clock time {deadline:.3f}); the "
            "run stops here and its compensations run. Give it a longer timeout= if it "
            "needs more time."
        )


class StateError(SurefootError):
    """Base of shared-state and messaging errors."""


ConflictKind = Literal["version", "fence", "stream", "transaction"]
"""What a refused condition was about (``ConflictError.kind``):

* ``version``: the key was not at the version the write expected (``expect=``);
* ``fence``: the write's fence, a lease key at a version, did not hold (taken over, released,
  or, at version 0, never acquired);
* ``stream``: the stream did not end at the sequence the append expected (``expect_last_seq``);
* ``transaction``: a compare of a multi-key transaction failed (its failure branch ran).
"""


class ConflictError(StateError):
    """A conditional write found the store in another state than its condition said;
    nothing was written.

    Attributes:
        kind: what the condition was about (:data:`ConflictKind`): ``version``, ``fence``,
            ``stream`` or ``transaction``.
        key: the key written; for ``fence``, the lease key; for ``stream``, the stream.
        expected: the version (for ``stream``: the last sequence number) the writer expected.
        version: the current version (0 when the key does not exist); for ``stream``, the
            stream's last sequence number.
        value: the current value (None for ``stream``).
        author: who wrote the current version (``""`` when nobody did).
    """

    def __init__(
        self,
        key: str,
        expected: int,
        version: int,
        value: Any,
        author: str,
        *,
        kind: ConflictKind = "version",
    ) -> None:
        self.kind = kind
        self.key = key
        self.expected = expected
        self.version = version
        self.value = value
        self.author = author
        super().__init__(_conflict_message(kind, key, expected, version, author))


def _conflict_message(kind: str, key: str, expected: int, version: int, author: str) -> str:
    """What a :class:`ConflictError` of ``kind`` says: what held, and what to do."""
    if kind == "fence" and version == 0:
        return (
            f"lease key {key!r} does not exist, so a write fenced on it (version {expected}) "
            f"is refused: acquire the lease first (write {key!r}) and fence on the version "
            "that write returns; nothing was written"
        )
    if kind == "fence":
        return (
            f"lease key {key!r} is at version {version} (written by {author!r}), not "
            f"{expected}: the lease was taken over or released, so this write is refused; "
            "re-acquire the lease, re-read the data and write again; nothing was written"
        )
    if kind == "stream":
        return (
            f"stream {key!r} ends at sequence {version}, not {expected} (expect_last_seq): "
            f"read the messages after {expected}, redo your append on them, and append again "
            f"with expect_last_seq={version}; nothing was appended"
        )
    if kind == "transaction":
        want = "absent" if expected == 0 else f"at version {expected}"
        return (
            f"transaction refused: key {key!r} is at version {version} (written by "
            f"{author!r}), not {want}; its failure branch ran instead, no success operation "
            "was applied. Re-read the keys and try again"
        )
    return (
        f"key {key!r} is at version {version} (written by {author!r}), not {expected}: "
        "re-read it, redo your change on the current value and write again."
    )


class CompactedError(StateError):
    """A read or watch asked for a revision that compaction removed.

    Attributes:
        what: what was asked (``key 'k'`` or ``namespace 'n'``).
        revision: the revision asked for.
        oldest: the oldest revision still kept for it.
    """

    def __init__(self, what: str, revision: int, oldest: int) -> None:
        self.what = what
        self.revision = revision
        self.oldest = oldest
        super().__init__(
            f"revision {revision} of {what} was compacted away; the oldest revision kept is "
            f"{oldest}: read the current value (or watch from revision {oldest - 1}, after a "
            "fresh snapshot) instead"
        )


class SchemaViolationError(StateError, ValueError):
    """A value does not match the schema declared for its key."""

    def __init__(self, key: str, field: str, reason: str) -> None:
        self.key = key
        self.field = field
        self.reason = reason
        super().__init__(
            f"key {key!r} field {field!r}: {reason}; nothing was written. Fix the value to "
            "match the schema declared for this key (Store.declare_schema) and write again"
        )


class DuplicateMessageError(StateError):
    """A message id was reused with a different payload."""

    def __init__(self, message_id: str, stream: str) -> None:
        self.message_id = message_id
        self.stream = stream
        super().__init__(
            f"message id {message_id!r} was already appended to {stream!r} with a different "
            "payload; a retry must resend the same payload, a new message needs a new id"
        )


class ScopeError(StateError, PermissionError):
    """An agent read or wrote a key outside the scope it was registered with.

    Attributes:
        agent: the agent.
        key: the key.
        action: ``read`` or ``write``.
    """

    def __init__(self, agent: str, key: str, action: str, allowed: list[str]) -> None:
        self.agent = agent
        self.key = key
        self.action = action
        super().__init__(
            f"agent {agent!r} may not {action} key {key!r}: its {action} scope is {allowed}. "
            f"Widen it with Store.register_agent({agent!r}, {action}=[...]) if that is intended."
        )


class TrustError(StateError):
    """Untrusted data reached a consequential tool or an instruction without endorsement.

    Attributes:
        sink: where the value was refused (``tool:send_email``, ``instruction``), if known.
        sources: the untrusted principals the value derives from.
    """

    def __init__(self, message: str, *, sink: str = "", sources: tuple[str, ...] = ()) -> None:
        self.sink = sink
        self.sources = sources
        super().__init__(message)
