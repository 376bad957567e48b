"""Large values as trees of content-addressed chunks, so repeated prefixes are stored once.

An agent loop that returns its whole message history from every step would journal the
history again at every step (O(n²) bytes for n turns). A value of at least the app's
threshold is instead cut into **leaves** and a **tree** of nodes above them, each node named
by a hash of its content; the step row holds only ``sfk:<height>:<length>:<root id>``.
The next step's value, the same history plus a turn, has the same leaves and nodes except
along its right edge, so it adds only those (the journal's insert of a node it already
has does nothing): bytes grow linearly with the turns.

* Leaves are cut where the content says, not at fixed offsets: after the first ``},`` or
  ``],`` (the end of an item of a list or object, in surefoot's compact JSON) at least
  ``MIN_LEAF`` characters after the previous cut, or at ``MAX_LEAF`` when there is none. An
  append changes only the last leaf; an edit in the middle changes the leaves around it and
  the cuts fall back into step after it.
* The levels above group node ids where the ids say (a group ends after an id ending in
  ``0``, so about 16 per group; at most ``MAX_FAN``): the tree's shape is a function of its
  leaves, so equal prefixes give equal nodes at every level (a "prolly tree").
* A leaf is stored through the payload codec (compressed or encrypted, each leaf alone);
  an inner node is its children's ids joined by ``,``. Ids are SHA-256 (first 128 bits) of
  the node's kind, the codec's name and its plain content: with an encrypting codec, equal
  chunks of one run are recognisable as equal (that is how they are shared), nothing more.

Pure functions: :func:`split` makes the nodes, :func:`join_all` reads refs back through a
``fetch(ids) -> {id: data}`` callable (one call per tree level for all refs together).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from hashlib import sha256

from ..errors import CorruptionError, JournalError

__all__ = ["MAX_FAN", "MAX_LEAF", "MIN_LEAF", "REF", "is_ref", "join_all", "split"]

REF = "sfk:"
MIN_LEAF = 1024
MAX_LEAF = 8192
MAX_FAN = 64


def is_ref(text: str | None) -> bool:
    """True if ``text`` is a chunk reference (plain JSON never starts with ``s``)."""
    return text is not None and text.startswith(REF)


def _id(kind: bytes, tag: bytes, content: str) -> str:
    h = sha256(kind)  # OpenSSL's SHA-256: faster here than hashlib's BLAKE2b
    h.update(tag)
    h.update(content.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def _leaves(text: str) -> list[str]:
    out: list[str] = []
    start, n, find = 0, len(text), text.find
    while start < n:
        if n - start <= MIN_LEAF:
            out.append(text[start:])
            break
        lo, hi = start + MIN_LEAF, start + MAX_LEAF
        cut = find("},", lo, hi)  # str.find: a C scan, twice as fast as a regex here
        other = find("],", lo, cut + 1 if cut >= 0 else hi)
        if other >= 0:
            cut = other
        end = cut + 2 if cut >= 0 else hi
        out.append(text[start:end])
        start = end
    return out or [text]


def _groups(ids: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    cur: list[str] = []
    for i in ids:
        cur.append(i)
        if len(cur) >= MAX_FAN or (len(cur) >= 2 and i[-1] == "0"):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def split(text: str, tag: str, encode: Callable[[str, str], str]) -> tuple[str, dict[str, str]]:
    """``text`` as ``(ref, {node id: stored data})``.

    Args:
        tag: the payload codec's name ("" without one); part of every id, so values
            written under different codecs never share a node.
        encode: ``encode(leaf id, leaf text)``: the leaf as stored (through the codec).
    """
    t = tag.encode()
    nodes: dict[str, str] = {}
    level: list[str] = []
    for leaf in _leaves(text):
        i = _id(b"L", t, leaf)
        if i not in nodes:
            nodes[i] = encode(i, leaf)
        level.append(i)
    height = 0
    while len(level) > 1:
        up: list[str] = []
        for group in _groups(level):
            body = ",".join(group)
            i = _id(b"N", t, body)
            nodes[i] = body
            up.append(i)
        level = up
        height += 1
    return f"{REF}{height}:{len(text)}:{level[0]}", nodes


def _parse(ref: str, where: str) -> tuple[int, int, str]:
    try:
        height, length, root = ref[len(REF) :].split(":")
        return int(height), int(length), root
    except ValueError:
        raise JournalError(
            f"{where} holds a damaged chunk reference {ref[:80]!r}; the journal was changed "
            "outside surefoot (restore it from a backup)"
        ) from None


def join_all(
    refs: Iterable[str],
    fetch: Callable[[list[str]], dict[str, str]],
    decode: Callable[[str], str],
    where: str,
    *,
    tag: str = "",
    url: str = "",
) -> dict[str, str]:
    """The text of every ref in ``refs``, reading each node once, each checked against its
    id (the hash of its content: a node is content-addressed, so it carries its checksum).

    Args:
        fetch: the stored data of the given node ids (of one run).
        decode: a leaf's stored data as its plain text (through the codec).
        where: named in errors (``run 'r1'``).
        tag: the payload codec's name, as given to :func:`split` ("" without one).
        url: the journal's, named in a ``CorruptionError``.

    Raises:
        JournalError: a node is missing or the text has not the recorded length (the
            journal was changed outside surefoot).
        CorruptionError: a node's content does not hash to its id (the file was damaged);
            nothing is returned.
    """
    todo = {ref: _parse(ref, where) for ref in dict.fromkeys(refs)}
    seen: dict[str, str] = {}
    t = tag.encode()
    checked: set[str] = set()

    def check(kind: bytes, i: str, content: str) -> None:
        if i in checked:
            return
        checked.add(i)
        if _id(kind, t, content) != i:
            raise CorruptionError(
                url,
                f"{where}, chunk {i} (table durable_chunks)",
                f"{where}: chunk {i} of a stored value does not hash to its id: the journal "
                "was damaged after it was written (a failing disk, or a change made outside "
                "surefoot). It was refused, not served. Restore the journal from a backup "
                "(docs/reliability.md, section 4).",
            )

    def get(ids: list[str]) -> None:
        missing = [i for i in dict.fromkeys(ids) if i not in seen]
        if missing:
            seen.update(fetch(missing))
        for i in ids:
            if i not in seen:
                raise JournalError(
                    f"{where}: chunk {i} of a stored value is missing; the journal was "
                    "changed outside surefoot (restore it from a backup)"
                )

    frontier = {ref: (h, [root]) for ref, (h, _, root) in todo.items()}
    while any(h > 0 for h, _ in frontier.values()):
        inner = [i for h, ids in frontier.values() if h > 0 for i in ids]
        get(inner)
        for i in dict.fromkeys(inner):
            check(b"N", i, seen[i])
        frontier = {
            ref: (h - 1, [c for i in ids for c in seen[i].split(",")]) if h > 0 else (h, ids)
            for ref, (h, ids) in frontier.items()
        }
    get([i for _, ids in frontier.values() for i in ids])
    plain: dict[str, str] = {}
    out: dict[str, str] = {}
    for ref, (_, ids) in frontier.items():
        for i in ids:
            if i not in plain:
                plain[i] = decode(seen[i])
                check(b"L", i, plain[i])
        text = "".join(plain[i] for i in ids)
        if len(text) != todo[ref][1]:
            raise JournalError(
                f"{where}: a stored value has {len(text)} characters where its reference "
                f"records {todo[ref][1]}; the journal was changed outside surefoot"
            )
        out[ref] = text
    return out
