"""messages.deliver over a seeded Channel: traffic, effects, dead letters and redrive."""

from __future__ import annotations

import pytest

from surefoot.errors import ConfigError
from surefoot_lab.statebus import messages
from surefoot_lab.statebus.channel import Channel


def test_at_most_once_sends_once_and_loses_some() -> None:
    """No acks, no retries: sent == n, effects + missing == n, nothing repeated."""
    r = messages.deliver("at_most_once", 200, Channel(loss=0.3), 0)
    assert r.sent == 200 and r.acks == 0 and r.dead_letters == []
    assert r.missing > 0 and r.effects + r.missing == 200 and r.repeated == 0


def test_same_seed_same_traffic_for_at_least_once_and_idempotent() -> None:
    """Dedup at the receiver changes effects, not the traffic on the wire."""
    alo = messages.deliver("at_least_once", 100, Channel(), 5)
    idem = messages.deliver("idempotent", 100, Channel(), 5)
    assert (alo.sent, alo.acks, alo.ticks, len(alo.dead_letters)) == (
        idem.sent,
        idem.acks,
        idem.ticks,
        len(idem.dead_letters),
    )
    assert alo.repeated > 0 and idem.repeated == 0
    assert alo.effects == idem.effects + alo.repeated
    assert alo.missing == idem.missing


def test_a_perfect_channel_needs_one_send_each() -> None:
    """No loss and no delay beyond the timeout: n sends, n acks, n effects."""
    r = messages.deliver("at_least_once", 50, Channel(loss=0.0, delay=0), 0)
    assert (r.sent, r.acks, r.effects, r.repeated, r.missing) == (50, 50, 50, 0, 0)


def test_channel_duplicates_repeat_effects_unless_idempotent() -> None:
    """A duplicating channel repeats effects even at most once; idempotent never repeats."""
    ch = Channel(loss=0.0, duplicate=0.5, delay=0)
    assert messages.deliver("at_most_once", 100, ch, 0).repeated > 0
    assert messages.deliver("idempotent", 100, ch, 0).repeated == 0


def test_dead_letters_keep_message_reason_and_history() -> None:
    """An unacked message is dead-lettered whole after max_attempts, one history row per send."""
    r = messages.deliver("idempotent", 100, Channel(loss=0.5), 0, max_attempts=3)
    assert r.dead_letters
    for d in r.dead_letters:
        assert d.reason == "max_attempts" and d.attempts == 3
        assert set(d.message) == {"id", "body"} and len(d.history) == 3
        assert [h["attempt"] for h in d.history] == [1, 2, 3]
        assert d.effect_applied == (d.message["id"] in r.applied)
    assert r.missing == sum(1 for d in r.dead_letters if not d.effect_applied)


def test_redrive_to_an_idempotent_receiver_fills_the_gaps_without_repeats() -> None:
    """Redriving the dead letters applies the missing ones and repeats none."""
    r = messages.deliver("idempotent", 100, Channel(loss=0.4), 0)
    assert r.missing > 0
    after = messages.redrive(r, Channel(loss=0.4), seed=9)
    assert after.missing < r.missing and after.repeated == 0
    assert after.sent >= len(r.dead_letters)


def test_redrive_to_a_non_deduplicating_receiver_repeats_applied_ones() -> None:
    """at_least_once redrive of dead letters whose ack was lost applies them again."""
    r = messages.deliver("at_least_once", 100, Channel(loss=0.4), 0)
    applied = sum(1 for d in r.dead_letters if d.effect_applied)
    assert applied > 0
    assert messages.redrive(r, Channel(loss=0.0), seed=1).repeated >= r.repeated + applied


def test_averaged_over_seeds() -> None:
    """averaged gives the mean of each count over the seeds."""
    runs = [messages.deliver("at_least_once", 50, Channel(), s).as_dict() for s in (0, 1, 2)]
    m = messages.averaged("at_least_once", 50, Channel(), seeds=[0, 1, 2])
    assert m["sent"] == sum(r["sent"] for r in runs) / 3


@pytest.mark.parametrize(
    "kw", [{"loss": 1.5}, {"duplicate": -0.1}, {"delay": -1}, {"delay": 0.5}, {"loss": True}]
)
def test_channel_rejects_bad_parameters(kw: dict[str, object]) -> None:
    """Probabilities must lie in [0, 1] and delays be whole ticks."""
    with pytest.raises(ConfigError):
        Channel(**kw)  # type: ignore[arg-type]


def test_deliver_rejects_bad_parameters() -> None:
    """Unknown policy, negative n and max_attempts < 1 are ConfigErrors."""
    with pytest.raises(ConfigError):
        messages.deliver("exactly_once", 10)
    with pytest.raises(ConfigError):
        messages.deliver("idempotent", -1)
    with pytest.raises(ConfigError):
        messages.deliver("idempotent", 10, max_attempts=0)
