"""``surefoot fake-provider``: the provider that fails on cue, for your own integration tests."""

from __future__ import annotations

import signal
import threading

import click

from .. import testing
from ._options import FaultSpec


@click.command("fake-provider")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 (0: a free one; the URL is printed).",
)
@click.option(
    "--fault",
    "faults",
    type=FaultSpec(),
    multiple=True,
    metavar="SPEC",
    help="What the next request gets, in order (repeat): ok, slow=S, 503, "
    "429:retry-after=2, 429:retry-after-ms=150, 500:x-should-retry=false, quota, "
    "overloaded, drop-before, drop-during[=N], stream-error[=N[:TYPE]].",
)
@click.option(
    "--model",
    default="fake-provider-model",
    show_default=True,
    help="The model name GET /v1/models reports.",
)
@click.option(
    "--record",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    metavar="FILE",
    help="Append one JSON line per request to FILE (time, path, model, Idempotency-Key, the "
    "caller's x- headers, status returned), on disk before the reply is sent.",
)
def fake_provider(
    port: int, faults: tuple[testing.Fault, ...], model: str, record: str | None
) -> None:
    """Serve the OpenAI and Anthropic wire formats on 127.0.0.1, failing on cue.

    Point OPENAI_BASE_URL at URL/v1 or ANTHROPIC_BASE_URL at URL. Runs until SIGTERM or
    Ctrl-C, then prints how many requests it received.
    """
    provider = testing.FakeProvider(port, model=model, record=record)
    try:
        provider.start()
    except OSError as exc:
        raise click.BadParameter(
            f"port {port} is in use or cannot be bound on 127.0.0.1 ({exc.strerror or exc}); "
            "pick another port, or --port 0 for a free one",
            param_hint="'--port'",
        ) from None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with provider as fp:
        fp.script(list(faults))
        click.echo(f"fake provider listening on {fp.url}", err=False)
        try:
            while not stop.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass
        click.echo(f"received {fp.count()} requests, answered {fp.completed} in full", err=True)
