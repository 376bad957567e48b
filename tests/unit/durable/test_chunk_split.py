"""The chunk trees themselves: any text comes back as it was, and a value that grows by a
few items adds only a few nodes."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from surefoot.durable import _chunks as chunks
from surefoot.errors import JournalError


def _history(n: int, seed: int = 1) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(["alpha", "beta", "ünï", "日本", "x" * 9]) for _ in range(60))
        out.append({"role": "user" if i % 2 else "assistant", "content": f"{i}: {words}"})
    return out


def _text(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _split(text: str, tag: str = "") -> tuple[str, dict[str, str]]:
    return chunks.split(text, tag, lambda _i, leaf: leaf)


def _fetcher(store: dict[str, str], calls: list[int]) -> Callable[[list[str]], dict[str, str]]:
    def fetch(ids: list[str]) -> dict[str, str]:
        calls.append(len(ids))
        return {i: store[i] for i in ids if i in store}

    return fetch


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 9000, 70_000, 400_000])
def test_any_text_comes_back_as_it_was(size: int) -> None:
    rng = random.Random(size)
    text = "".join(rng.choice('ab}],{["\u00e9\U0001f600 ') for _ in range(size))
    ref, nodes = _split(text)
    back = chunks.join_all([ref], _fetcher(nodes, []), lambda s: s, "run 'r'")
    assert back == {ref: text}
    assert chunks.is_ref(ref) and not chunks.is_ref(text or "[]")


def test_appending_items_adds_only_the_right_edge() -> None:
    """A history of 300 messages, then 301: the new value needs at most a leaf or two and
    one node per level above, however long the history is."""
    h = _history(301)
    _, before = _split(_text(h[:300]))
    _, after = _split(_text(h))
    new = {i: d for i, d in after.items() if i not in before}
    height = int(_split(_text(h))[0].split(":")[1])
    assert height >= 2
    assert len(new) <= 2 + height
    new_bytes = sum(len(d) for d in new.values())
    assert new_bytes < len(_text(h[300:])) + chunks.MAX_LEAF + height * 64 * 33


def test_an_edit_in_the_middle_keeps_most_leaves() -> None:
    """Changing one message in the middle (and so shifting everything after it) still
    shares nearly all leaves: the cuts depend on the content, not on offsets."""
    h = _history(400)
    edited = [dict(m) for m in h]
    edited[200]["content"] += " (edited, and a little longer)"
    _, a = _split(_text(h))
    _, b = _split(_text(edited))
    shared = sum(len(d) for i, d in b.items() if i in a)
    assert shared > 0.9 * sum(len(d) for d in b.values())


def test_the_codec_name_is_part_of_every_id() -> None:
    """Values written under two codecs never share a node (so one never reads the other's)."""
    text = _text(_history(50))
    _, plain = _split(text)
    _, zipped = _split(text, "zlib")
    assert not set(plain) & set(zipped)


def test_refs_of_one_run_are_read_one_level_at_a_time_and_each_node_once() -> None:
    h = _history(300)
    store: dict[str, str] = {}
    refs = []
    for n in (100, 200, 300):
        ref, nodes = _split(_text(h[:n]))
        store.update(nodes)
        refs.append(ref)
    calls: list[int] = []
    back = chunks.join_all(refs, _fetcher(store, calls), lambda s: s, "run 'r'")
    assert [back[r] for r in refs] == [_text(h[:n]) for n in (100, 200, 300)]
    height = max(int(r.split(":")[1]) for r in refs)
    assert len(calls) == height + 1
    assert sum(calls) <= len(store)


def test_a_missing_node_or_a_wrong_length_is_a_clear_error() -> None:
    text = _text(_history(100))
    ref, nodes = _split(text)
    leaf = next(i for i, d in nodes.items() if not d.startswith(tuple("0123456789abcdef")))
    partial = {i: d for i, d in nodes.items() if i != leaf}
    with pytest.raises(JournalError, match=rf"run 'r': chunk {leaf} .* missing"):
        chunks.join_all([ref], _fetcher(partial, []), lambda s: s, "run 'r'")
    height, length, root = ref[len(chunks.REF) :].split(":")
    bad = f"{chunks.REF}{height}:{int(length) + 1}:{root}"
    with pytest.raises(JournalError, match="characters where its reference records"):
        chunks.join_all([bad], _fetcher(nodes, []), lambda s: s, "run 'r'")
    with pytest.raises(JournalError, match="damaged chunk reference"):
        chunks.join_all(["sfk:oops"], _fetcher(nodes, []), lambda s: s, "run 'r'")
