"""Seed 002 (durable execution): every exercise's "Done when", asserted on the lab's facts."""

from __future__ import annotations

from typing import Any

import surefoot_lab as lab

_NO_MODEL_CALL = {"durable.effects"}  # reads the workflow's code; calls no model


def run(exp_id: str, **kwargs: Any) -> lab.LabResult:
    """Run one experiment in quick mode with seed 0."""
    with lab.context(quick=True, seed=0, **kwargs) as ctx:
        result = lab.get(exp_id).run(ctx)
    assert result.tables and result.answer
    assert result.model == (lab.NO_MODEL if exp_id in _NO_MODEL_CALL else lab.FAKE_MODEL)
    return result


def test_easy1_strategies() -> None:
    """Restart pays extra model calls and duplicates; journal_keys pays nothing extra, no dups."""
    f = run("durable.strategies").facts
    assert f["extra_model_calls"]["restart"] > 0
    assert f["extra_model_calls"]["journal"] == 0
    assert f["extra_model_calls"]["journal_keys"] == 0
    assert f["duplicates"]["journal_keys"] == 0
    assert f["duplicates"]["restart"] >= f["duplicates"]["journal"] >= 1
    cost = f["cost"]
    assert cost["restart"]["usd_per_run"] > cost["journal_keys"]["usd_per_run"]
    assert cost["journal_keys"]["model_calls_per_run"] == 3


def test_easy2_window() -> None:
    """A crash after publish duplicates the post without the key and never with it."""
    f = run("durable.window").facts
    assert f["journal"]["duplicates"] == 1
    assert f["journal_keys"] == {
        "publish_calls": 2,
        "posts": 1,
        "duplicates": 0,
        "publish_attempts": 2,
        "keys_received": ["w:7", "w:7"],  # the same key both times, seen by the publisher
    }
    assert f["journal_keys_service_ignores_keys"]["duplicates"] == 1


def test_easy3_effects() -> None:
    """describe() lists the seven steps by kind; the one effect is compensated and keyed."""
    f = run("durable.effects").facts
    assert f["kinds"] == {
        "plan": "pure",
        "search": "pure",
        "read": "pure",
        "summarize": "pure",
        "draft": "pure",
        "approve": "wait",
        "publish": "effect",
    }
    assert f["compensations"] == {"publish": "unpublish"}
    assert f["effects_without_key_plan"] == []


def test_medium1_kill9() -> None:
    """A SIGKILLed worker's run completes after restart without recomputing journalled steps."""
    f = run("durable.kill9").facts
    keys = f["journal_keys"]
    assert keys["status"] == "succeeded"
    assert {"plan", "search"} <= set(keys["journalled_before_kill"])
    assert keys["calls_per_step"]["plan"] == 1 and keys["calls_per_step"]["search"] == 1
    assert keys["repeated_for_journalled_steps"] == 0
    assert keys["calls_per_step"]["publish"] == 1
    assert f["restart"]["status"] == "succeeded"
    assert f["restart"]["calls_per_step"]["plan"] == 2


def test_medium2_versions() -> None:
    """v1 runs finish on v1, new runs use v2; stranded and mismatched runs are visible."""
    f = run("durable.versions").facts
    assert f["versions"] == {"r-old": "1", "r-new": "2"}
    assert f["statuses"] == {"r-old": "succeeded", "r-new": "succeeded"}
    assert "fact_check" not in f["r_old_steps"] and "fact_check" in f["r_new_steps"]
    assert f["stranded"] is True and f["stranded_status"] == "sleeping"
    assert f["v2_worker_claimed"] == 0
    assert f["edited_status"] == "needs_attention"
    msg = f["mismatch"]["message"]
    assert f["mismatch"]["type"].endswith("StepMismatchError")
    assert "r-edited" in msg and "6" in msg and "signal:approve" in msg and "fact_check" in msg


def test_medium3_timers() -> None:
    """Sleeping runs hold no lease, coroutine or slot, and resume once the clock passes."""
    f = run("durable.timers").facts
    n = f["runs"]
    assert f["sleeping"] == n
    assert f["lease_held_while_sleeping"] == 0
    assert f["in_memory_while_sleeping"] == 0 and f["tasks_while_sleeping"] == 0
    assert f["claimed_before_deadline"] == 0
    assert f["claimed_after_deadline"] == n and f["succeeded"] == n


def test_hard1_chaos() -> None:
    """Under SIGKILL chaos journal_keys completes every run with no duplicate post."""
    f = run("durable.chaos").facts
    assert f["kills"] >= 1
    keys = f["journal_keys"]
    assert keys["completion_rate"] == 1.0
    assert keys["duplicates"] == 0
    assert keys["repeated_after_journal"] == 0
    assert f["journal"]["repeated_after_journal"] == 0
    assert f["restart"]["repeated_after_journal"] is None


def test_hard3_saga() -> None:
    """A failed compensation parks the run with an audit of what was undone; retry finishes."""
    f = run("durable.saga").facts
    assert f["status_before"] == "needs_attention"
    assert f["live_before"] == ["blog"]
    assert [u["pos"] for u in f["undone"]] == ["8"]
    assert [u["pos"] for u in f["not_undone"]] == ["7"]
    assert f["status_after"] == "failed" and f["live_after"] == []
    assert "retry" in f["audit_actions"]


def test_answers_agree_with_facts() -> None:
    """Each durable answer states the counts its facts hold, and success only when they show it."""
    strategies = run("durable.strategies")
    f, a = strategies.facts, strategies.answer
    for st in ("restart", "journal", "journal_keys"):
        dup = f["duplicates"][st]
        assert f"{st} paid" in a and f"({f['extra_model_calls'][st]} repeated)" in a
        assert (f"{st} paid" in a) and (
            "never posted twice" if dup == 0 else f"posted twice {dup} times"
        ) in a.split(f"{st} paid", 1)[1].split(";")[0]

    window = run("durable.window")
    f, a = window.facts, window.answer
    assert f["journal"]["keys_received"] == [None, None]  # observed at the publisher
    assert all(f["journal_keys"]["keys_received"])
    assert "journal: 2 publish requests (without a key), 2 posts, 1 duplicate." in a
    assert "journal_keys: 2 publish requests (with a key), 1 posts, no duplicate." in a
    assert window.tables[0].rows[0][2] == "no" and window.tables[0].rows[1][2] == "yes"

    effects = run("durable.effects")
    assert "publish is effect" in effects.answer and "undone by unpublish" in effects.answer

    kill9 = run("durable.kill9")
    f, a = kill9.facts, kill9.answer
    k = f["journal_keys"]
    assert f"journal_keys: the restarted run ended {k['status']}" in a
    assert f"{k['repeated_for_journalled_steps']} repeated calls for steps journalled" in a
    assert f"restart: the restarted run ended {f['restart']['status']}" in a
    assert f"plan={f['restart']['calls_per_step']['plan']}" in a

    versions = run("durable.versions")
    f, a = versions.facts, versions.answer
    assert f"ended {f['statuses']['r-old']} on version {f['versions']['r-old']}" in a
    assert f"claimed {f['v2_worker_claimed']} times" in a
    assert ("is flagged stranded" if f["stranded"] else "is not flagged stranded") in a
    assert f"ended {f['edited_status']} with StepMismatchError" in a

    timers = run("durable.timers")
    f, a = timers.facts, timers.answer
    n = f["runs"]
    assert f"{f['sleeping']} of {n} runs" in a
    assert "held no lease, no coroutine and no run in memory" in a
    assert f["in_memory_before_deadline"] == 0 and f["tasks_before_deadline"] == 0
    assert f["succeeded_while_sleeping"] == 0 and f["succeeded_before_deadline"] == 0
    assert f"claimed {f['claimed_before_deadline']} runs" in a
    assert f"took {f['claimed_after_deadline']} and {f['succeeded']} of {n} succeeded" in a
    rows = timers.tables[0].rows
    assert rows[1][2:4] == [0, 0] and rows[2][6] == n  # measured cells, not typed

    chaos = run("durable.chaos")
    f, a = chaos.facts, chaos.answer
    for st in ("restart", "journal", "journal_keys"):
        r = f[st]
        assert f"{st}: {r['completed']}/{r['runs']} runs completed" in a
        dup = r["duplicates"]
        tail = a.split(f"{st}: ", 1)[1].split(".")[0]
        assert ("never posted twice" if dup == 0 else f"{dup} duplicate posts") in tail

    saga = run("durable.saga")
    f, a = saga.facts, saga.answer
    assert f["unpublish_refused"] == 3
    assert f"refused {f['unpublish_refused']} times" in a
    assert f"The run stopped {f['status_before']}" in a
    assert f"ended the run {f['status_after']} with {len(f['live_after'])} posts still live" in a
    assert sorted(u["pos"] for u in f["undone_after"]) == ["7", "8"]
    assert f["not_undone_after"] == []
    assert saga.tables[0].rows[1][4] == "-"


def test_strategies_crash_point_note_and_answer_come_from_the_table() -> None:
    """The by-point note names exactly the cells where no crash fired; answer counts match."""
    res = run("durable.strategies")
    by_point = res.tables[1]
    strategies = by_point.columns[2:]
    quiet: list[str] = []
    fired = dict.fromkeys(strategies, 0)
    for row in by_point.rows:
        cells = [str(c).split(" / ") for c in row[2:]]
        assert all(len(c) == 3 for c in cells)  # extra calls / duplicate posts / crashed
        for st, (_, _, crashed) in zip(strategies, cells, strict=True):
            fired[st] += int(crashed)
        names = [st for st, c in zip(strategies, cells, strict=True) if c[2] == "0"]
        if names:
            quiet.append(f"{row[0]} under {', '.join(names)}")
    assert res.facts["crash_never_fired"] == quiet
    if quiet:
        assert all(q in by_point.note for q in quiet)
    else:
        assert by_point.note == "Every planned crash fired."
    assert fired == res.facts["crashed"]
    assert ", ".join(f"{st} {n}" for st, n in fired.items()) in res.answer


def test_window_key_sentence_follows_the_measured_duplicates() -> None:
    """The closing sentence of durable.window quotes the duplicate counts its facts hold."""
    res = run("durable.window")
    f = res.facts
    ignored = f["journal_keys_service_ignores_keys"]["duplicates"]
    assert f["journal_keys"]["duplicates"] == 0 and ignored > 0
    assert f"a service that ignores it still gave {ignored} duplicate" in res.answer
