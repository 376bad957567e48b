"""Redis users whose ACL refuses the commands surefoot uses to find out a lost answer
(``CLIENT ID`` when connecting, ``CLIENT KILL ID`` after the loss): the store still reads
and writes, and a write whose answer was lost raises ``OutcomeUnknownError`` (unknown,
said in a type), never a wrong answer. On a Redis server of the test's own
(benchmarks/chaos/private_redis.py), never on the shared one: ACL users are server-wide."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from surefoot.testing import FaultProxy

pytestmark = [pytest.mark.crash]

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks" / "chaos"))
import private_redis  # noqa: E402

# Everything but CLIENT; everything but CLIENT KILL (CLIENT ID allowed).
USERS = {
    "noclient": ["+@all", "-client"],
    "nokill": ["+@all", "-client", "+client|id"],
    "full": ["+@all"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[private_redis.PrivateRedis]:
    pytest.importorskip("redis")
    if private_redis.redis_server() is None:
        if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
            pytest.fail("redis-server is not installed, and SUREFOOT_REQUIRE_SERVICES=1 needs it")
        pytest.skip("redis-server is not installed")
    with private_redis.PrivateRedis(tmp_path_factory.mktemp("acl-redis")) as srv:
        admin = srv.client()
        for name, rules in USERS.items():
            admin.execute_command("ACL", "SETUSER", name, "on", f">pw-{name}", "~*", "&*", *rules)
        admin.close()
        yield srv


def user_url(server: private_redis.PrivateRedis, user: str) -> str:
    prefix = f"sf_acl_{uuid.uuid4().hex[:8]}"
    return f"redis://{user}:pw-{user}@127.0.0.1:{server.port}/0?prefix={prefix}&reconnect_timeout=5"


def test_the_users_are_refused_what_they_should_be(server: private_redis.PrivateRedis) -> None:
    """The premise: the ACLs refuse exactly those commands on this server."""
    import redis

    for user, refused in (("noclient", "CLIENT ID"), ("nokill", "CLIENT KILL ID 999999")):
        r = redis.Redis.from_url(f"redis://{user}:pw-{user}@127.0.0.1:{server.port}/0")
        with pytest.raises(redis.exceptions.NoPermissionError):
            r.execute_command(*refused.split())
        assert r.ping()
        r.close()


@pytest.mark.parametrize("user", ["noclient", "nokill"])
def test_a_user_refused_client_commands_reads_and_writes(
    server: private_redis.PrivateRedis, user: str
) -> None:
    from surefoot.statebus import Store, Stream

    store, stream = Store(user_url(server, user)), Stream(user_url(server, user), "s")
    try:
        assert store.write("k", 1).version == 1
        assert store.write("k", 2, expect=1).version == 2
        store.declare_merge("l", "append")
        store.merge("l", "a")
        assert store.read("l").value == ["a"]
        assert stream.append("m", message_id="m1").seq == 1
    finally:
        store.close()
        stream.close()


@pytest.mark.parametrize(("user", "why"), [("noclient", ""), ("nokill", "was refused")])
def test_a_lost_answer_without_client_permission_is_outcome_unknown(
    server: private_redis.PrivateRedis, user: str, why: str
) -> None:
    """The write landed but its answer was lost; without CLIENT ID (no id to close) or
    CLIENT KILL (refused) surefoot cannot make sure the old connection's write is done,
    so it says the outcome is unknown: never "not applied", never a second write."""
    from surefoot.errors import OutcomeUnknownError
    from surefoot.statebus import Store

    url = user_url(server, user)
    with FaultProxy(url) as proxy:
        store, direct = Store(proxy.url), Store(url)
        try:
            store.write("warm", 0)
            proxy.drop_reply_to_exec(matching="unsure-val")
            with pytest.raises(OutcomeUnknownError, match=why or "may or may not"):
                store.write("unsure-key", "unsure-val", expect=0)
            assert proxy.counts().replies_dropped == 1
            assert [c.value for c in direct.history("unsure-key")] == ["unsure-val"]  # once
        finally:
            store.close()
            direct.close()


def test_the_same_lost_answer_for_a_full_user_is_resolved(
    server: private_redis.PrivateRedis,
) -> None:
    """The contrast, on the same private server: with CLIENT permitted it is found out."""
    from surefoot.statebus import Store

    url = user_url(server, "full")
    with FaultProxy(url) as proxy:
        store, direct = Store(proxy.url), Store(url)
        try:
            store.write("warm", 0)
            proxy.drop_reply_to_exec(matching="unsure-val")
            e = store.write("unsure-key", "unsure-val", expect=0)
            assert (e.value, e.version) == ("unsure-val", 1)
            assert [c.value for c in direct.history("unsure-key")] == ["unsure-val"]
        finally:
            store.close()
            direct.close()
