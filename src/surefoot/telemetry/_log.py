"""Logging under ``surefoot.*``: one line per event, plain or JSON lines, secrets redacted.

surefoot never calls ``logging.basicConfig``: it logs to the ``surefoot.*`` loggers and
the application decides where lines go. ``configure_logging`` is a convenience for the
CLI and for scripts. Every surefoot logger carries a ``RedactingFilter``, so a secret in a
message, an argument, an exception or a structured field is masked before any handler
sees the record, whatever handler the application attached.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import IO, Any

from ..redaction import redact_url

__all__ = [
    "LOG_FORMATS",
    "JsonFormatter",
    "RedactingFilter",
    "configure_logging",
    "get_logger",
    "log_event",
    "redact",
    "redact_value",
]

LOG_FORMATS = ("text", "json")
REDACTED = "[redacted]"

# Field names whose values are never logged, whatever they hold.
_SECRET_NAME = re.compile(
    r"(?i)(api[_-]?key|secret|token|password|passwd|authorization|cookie|credential|"
    r"private[_-]?key|access[_-]?key)"
)
# Secrets inside free text: the value is masked, the name around it is kept.
_SECRET_TEXT = (
    # provider keys: sk-..., sk-ant-..., xoxb-..., ghp_..., AKIA...
    re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{8,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{6,}")
_ASSIGNED = re.compile(
    r"(?i)\b((?:api[_-]?key|x-api-key|secret|token|password|passwd|authorization)"
    r"[\"']?\s*[:=]\s*[\"']?)(?!(?:bearer|basic)\s)([^\s\"',;&}]+)"
)
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s\"'<>]+")


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens, ``password=…`` values and URL secrets masked.

    Each URL in the text goes through ``surefoot.redaction.redact_url`` (the one URL redaction).

    >>> redact("postgresql://app:hunter2@db/x key=sk-abcdefghijkl")
    'postgresql://app:***@db/x key=[redacted]'
    """
    if not text:
        return text
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    for pat in _SECRET_TEXT:
        text = pat.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _ASSIGNED.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def redact_value(value: Any, name: str = "") -> Any:
    """``value`` (JSON-like) as logs show it: the value of a field named like a secret
    (``api_key``, ``password``, ``token`` …) is ``[redacted]`` whatever it holds, and text
    anywhere goes through :func:`redact`. ``name``: the field ``value`` is held under.

    >>> redact_value({"to": "ann", "password": "pw", "note": "key sk-abcdefghijkl"})
    {'to': 'ann', 'password': '[redacted]', 'note': 'key [redacted]'}
    """
    return _redact_value(name, value)


def _redact_value(name: str, value: Any) -> Any:
    if _SECRET_NAME.search(name):
        return REDACTED
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {str(k): _redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(name, v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """Masks secrets in a record before any handler formats it (never drops a record).

    The message is formatted with its arguments and redacted; the exception text is
    formatted and redacted too; the structured fields (``extra={"surefoot": {...}}``) lose
    the values of secret-named fields and have secrets in text masked.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_surefoot_redacted", False):
            return True
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string: keep what logging would show
            msg = str(record.msg)
        record.msg, record.args = redact(msg), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        fields = getattr(record, "surefoot", None)
        if isinstance(fields, Mapping):
            record.surefoot = {str(k): _redact_value(str(k), v) for k, v in fields.items()}
        record._surefoot_redacted = True
        return True


_FILTER = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (which must start with ``surefoot``), with the redacting filter."""
    if name != "surefoot" and not name.startswith("surefoot."):
        raise ValueError(f"surefoot loggers are named 'surefoot.*', got {name!r}")
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def _fmt_value(v: Any) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return json.dumps(s) if (not s or any(c in s for c in ' "=\n')) else s


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event: the line reads ``event k=v …``; the fields ride along as structure.

    Fields that are None are left out. ``JsonFormatter`` writes them as JSON keys.
    """
    if not logger.isEnabledFor(level):
        return
    kept = {k: v for k, v in fields.items() if v is not None}
    text = " ".join([event, *(f"{k}={_fmt_value(v)}" for k, v in kept.items())])
    logger.log(level, "%s", text, extra={"surefoot": {"event": event, **kept}})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``,
    the event's fields (``event``, ``run_id``, ``workflow``, ``step``, ``worker`` …) and
    ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "surefoot", None)
        if isinstance(fields, Mapping):
            for k, v in fields.items():
                out.setdefault(str(k), v)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, default=str, ensure_ascii=False)


_HANDLER_MARK = "_surefoot_handler"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at each line (it may be replaced later)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:  # StreamHandler.setStream; stderr it stays
        pass


def configure_logging(
    *,
    level: int | str = "INFO",
    format: str | None = None,
    stream: IO[str] | None = None,
) -> logging.Handler:
    """Send ``surefoot.*`` lines to ``stream`` (stderr by default), as text or JSON lines.

    Calling it again replaces the handler it added before (never one you added). The
    handler writes ``level`` and above; the ``surefoot`` logger's own level is lowered to
    ``level`` if it was higher (or unset), never raised, so other handlers keep what they get.

    Args:
        level: the lowest level written (``"INFO"``, ``logging.DEBUG`` …).
        format: ``"text"`` or ``"json"``; None reads ``SUREFOOT_LOG_FORMAT`` (default text).
        stream: where lines go.

    Returns:
        The handler it attached to the ``surefoot`` logger.

    Raises:
        ValueError: an unknown format, naming the ones there are.
    """
    fmt = (format or os.environ.get("SUREFOOT_LOG_FORMAT") or "text").lower()
    if fmt not in LOG_FORMATS:
        raise ValueError(
            f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r} "
            "(from the format argument or SUREFOOT_LOG_FORMAT)"
        )
    root = get_logger("surefoot")
    for h in list(root.handlers):
        if getattr(h, _HANDLER_MARK, False):
            root.removeHandler(h)
    handler: logging.Handler = (
        logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    )
    setattr(handler, _HANDLER_MARK, True)
    handler.addFilter(_FILTER)  # records of loggers made without get_logger too
    handler.setFormatter(
        JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    lvl = level if isinstance(level, int) else logging.getLevelName(level.upper())
    if not isinstance(lvl, int):
        raise ValueError(f"log level must be DEBUG, INFO, WARNING or ERROR, got {level!r}")
    handler.setLevel(lvl)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > lvl:
        root.setLevel(lvl)
    return handler
