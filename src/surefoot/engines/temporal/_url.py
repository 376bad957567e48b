"""``temporal://host:port?namespace=…&task_queue=…``: where an app's runs go on Temporal.

Standard library only: the URL is read (and refused with a clear error) before anything
imports the SDK.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from ...errors import ConfigError

__all__ = ["TemporalConfig", "parse_url"]

_FLOATS = ("step_timeout", "heartbeat", "sticky")
_KNOWN = ("namespace", "task_queue", *_FLOATS)


@dataclass(frozen=True, slots=True)
class TemporalConfig:
    """An app's Temporal settings, from its URL.

    Attributes:
        address: ``host:port`` of the Temporal frontend (default port 7233).
        namespace: the Temporal namespace (``default``).
        task_queue: the task queue its workflows and steps are served on (``surefoot``).
        step_timeout: seconds one attempt of a step may take (``start_to_close``; 600).
        heartbeat: seconds without a heartbeat after which a step's attempt counts as lost
            (its worker died): a step's activity heartbeats every third of it (10).
        sticky: the worker's ``sticky_queue_schedule_to_start_timeout`` in seconds (2; the
            SDK's 10 s default stalls every resumption after a worker died by 10 s).
    """

    address: str
    namespace: str = "default"
    task_queue: str = "surefoot"
    step_timeout: float = 600.0
    heartbeat: float = 10.0
    sticky: float = 2.0

    def url(self) -> str:
        """The URL back (for messages)."""
        return f"temporal://{self.address}?namespace={self.namespace}&task_queue={self.task_queue}"

    def show_hint(self, run_id: str) -> str:
        """Where to look at one run (``surefoot runs show`` reads journals, not Temporal)."""
        return (
            f"See `surefoot engine show {run_id} --app MODULE:APP --url '{self.url()}'`, or "
            "the run in the Temporal UI."
        )

    def list_hint(self) -> str:
        """Where to list runs (``surefoot runs list`` reads journals, not Temporal)."""
        return (
            f"list runs with `temporal workflow list --address {self.address} --namespace "
            f"{self.namespace}` or in the Temporal UI"
        )


def parse_url(url: str) -> TemporalConfig:
    """Read ``temporal://host[:port][?namespace=N&task_queue=Q&step_timeout=S&heartbeat=S&sticky=S]``.

    Raises:
        ConfigError: another scheme, no host, a bad port, an unknown or bad option.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "temporal":
        raise ConfigError(f"a Temporal URL starts with temporal://, got {url!r}")
    if not parts.hostname:
        raise ConfigError(
            f"{url!r} has no host; write temporal://127.0.0.1:7233?namespace=default"
            "&task_queue=surefoot"
        )
    try:
        port = parts.port or 7233
    except ValueError:
        raise ConfigError(f"{url!r} has a bad port; write temporal://HOST:PORT") from None
    host = parts.hostname
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_KNOWN))
    if unknown:
        raise ConfigError(
            f"{url!r} has unknown option(s) {', '.join(unknown)}; known: {', '.join(_KNOWN)}"
        )
    opts: dict[str, str | float] = {}
    for key, values in query.items():
        value = values[-1]
        if key in _FLOATS:
            try:
                number = float(value)
            except ValueError:
                number = -1.0
            if not number > 0:
                raise ConfigError(
                    f"{key} in {url!r} must be a number of seconds > 0, got {value!r}"
                )
            opts[key] = number
        elif not value:
            raise ConfigError(f"{key} in {url!r} is empty; give a name or leave it out")
        else:
            opts[key] = value
    return TemporalConfig(address, **opts)  # type: ignore[arg-type]
