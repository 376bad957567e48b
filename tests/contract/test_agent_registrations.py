"""Agent registrations are shared through the store: a ``Store`` on the same URL (in this
process or another) knows an agent another registered, and the history says who did."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _backends import BACKENDS, backend_url

from surefoot import storage
from surefoot.errors import ConfigError, ScopeError
from surefoot.statebus import Store


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_second_store_knows_the_agents_the_first_registered(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = backend_url(kind, tmp_path, request, "agents")
    shared = storage.open(url) if kind == "memory" else None  # memory:// is one per open
    a = Store(shared or url, namespace="team")
    b = Store(shared or url, namespace="team")
    try:
        with pytest.raises(ConfigError, match="unknown agent 'critic'"):
            b.session("critic")
        revision = a.revision
        a.register_agent("critic", trust="untrusted", read=["draft*"], write=["review*"], by="ops")
        assert a.revision == revision  # registering writes nothing in the namespace
        critic = b.session("critic")  # no register_agent on b
        critic.write("review/1", "fine")
        entry = b.read("review/1")
        assert entry is not None and entry.author == "critic" and entry.trust == "untrusted"
        with pytest.raises(ScopeError):
            critic.write("draft/1", "not in its write scope")
        assert list(b.agents) == ["critic"]
        assert set(b.snapshot()) == {"review/1"}  # registrations are not keys of the namespace
        history = b.agents.history("critic")
        assert [c.value["registered_by"] for c in history] == ["ops"]
        # registering again replaces the scopes everywhere; the history keeps both
        b.register_agent("critic", trust="untrusted", read=["*"], write=["*"], by="lead")
        a.session("critic").write("draft/2", "now allowed")
        assert [c.value["registered_by"] for c in a.agents.history("critic")] == ["ops", "lead"]
        other = Store(shared or url, namespace="other")
        try:
            with pytest.raises(ConfigError, match="unknown agent 'critic' in namespace 'other'"):
                other.session("critic")
        finally:
            if shared is None:
                other.close()
    finally:
        a.close()
        b.close()
        if shared is not None:
            shared.close()


CHILD = """
import json, os, sys
from surefoot.statebus import Store

st = Store(sys.argv[1], namespace="team")
st.register_agent("critic", trust="trusted", read=["*"], write=["review*"])
print(json.dumps([st.session("critic").write("review/1", "from the child").version, os.getpid()]))
st.close()
"""


def test_an_agent_registered_in_another_process_is_known_here(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    here = Store(url, namespace="team")
    try:
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(CHILD), url],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        version, pid = json.loads(out.stdout)
        assert version == 1
        critic = here.session("critic")  # registered by the other process only
        assert critic.read("review/1") is not None
        (change,) = here.agents.history("critic")
        assert change.value["registered_by"].endswith(f":{pid}")  # user@host:pid
    finally:
        here.close()


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_live_session_follows_a_registration_changed_anywhere(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A scope revoked (or trust lowered) in another process reaches sessions opened before it
    within ``agents.max_age`` seconds (0 here: every operation reads the registration)."""
    url = backend_url(kind, tmp_path, request, "agents_live")
    shared = storage.open(url) if kind == "memory" else None
    a = Store(shared or url, namespace="team")
    b = Store(shared or url, namespace="team")
    try:
        a.register_agent("writer", trust="trusted", read=["*"], write=["*"], by="ops")
        b.agents.max_age = 0.0
        live = b.session("writer")  # opened before the change
        same = a.session("writer")
        live.write("notes/1", "allowed at first")
        # revoked in the other store (another process, as far as b can tell)
        a.register_agent("writer", trust="untrusted", read=["*"], write=["review*"], by="sec")
        with pytest.raises(ScopeError):
            live.write("notes/2", "no longer in its write scope")
        with pytest.raises(ScopeError):
            same.write("notes/3", "nor here, in the process that re-registered it")
        entry = live.write("review/1", "still allowed")
        assert entry.trust == "untrusted" and live.trust == "untrusted"
        assert b.read("notes/2") is None and a.read("notes/3") is None
    finally:
        a.close()
        b.close()
        if shared is not None:
            shared.close()


def test_registration_max_age_is_checked() -> None:
    st = Store("memory://", namespace="team")
    try:
        with pytest.raises(ValueError, match="max_age"):
            type(st.agents)(None, st.clock, max_age=-1)
    finally:
        st.close()
