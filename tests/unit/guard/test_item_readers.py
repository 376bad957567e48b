"""Who can already read an item (#28): a file's sharers (``shared_with`` is keyed by
address), an event's participants. Their labels come from the declaration; the readers of
one item the user pointed to may receive that item's own data, and nothing else; a task that
names an item may delegate an argument to its readers."""

from __future__ import annotations

from typing import Any

import pytest

from surefoot.errors import TrustError
from surefoot.guard import (
    Arg,
    CapabilityPolicy,
    Delegation,
    Labeled,
    ToolPolicy,
    label_output,
    named_in,
    trusted,
)
from surefoot.guard._labels import plain

FILE = {"id_": "record", "owner": "correspondent", "shared_with": "correspondent"}
FILES = dict(items=("filename", "id_"), readers=("owner", "shared_with"))
EVENT = {"id_": "record", "participants": "correspondent", "start_time": "record"}
POLICY = CapabilityPolicy(
    "drive",
    [
        ToolPolicy("search_files", {"query": Arg.any()}, FILE, "query", **FILES),
        ToolPolicy(
            "search_events",
            {"query": Arg.any()},
            EVENT,
            "query",
            items=("title",),
            readers=("participants",),
        ),
        ToolPolicy(
            "get_day", {"day": Arg.any()}, EVENT, "day", items=("title",), readers=("participants",)
        ),
        ToolPolicy(
            "send_email",
            {
                "recipients": Arg("user", "record", "correspondent", delegable=True),
                "body": Arg.any(),
            },
            audience=("recipients",),
        ),
        ToolPolicy(
            "create_event",
            {
                "participants": Arg("user", "record", "correspondent", delegable=True),
                "start_time": Arg("user", "record"),
            },
            audience=("participants",),
        ),
    ],
)
DRIVE = [
    {
        "id_": "25",
        "filename": "team-meeting-minutes.docx",
        "content": "David: deadline 2024-05-20",
        "owner": "emma@corp.com",
        "shared_with": {"david@corp.com": "rw"},
    },
    {
        "id_": "24",
        "filename": "newest-minutes.docx",
        "content": "team meeting minutes ...",
        "owner": "mallory@evil.com",
        "shared_with": {"mallory@evil.com": "rw"},
    },
]


def _search() -> list[dict[str, Any]]:
    return label_output(
        POLICY.tools["search_files"], DRIVE, {"query": trusted("team meeting minutes")}
    )


def _key(mapping: dict[Any, Any]) -> Labeled[Any]:
    (key,) = mapping.keys()
    return key


def test_a_mapping_keyed_by_readers_has_labelled_keys_naming_the_item() -> None:
    """``shared_with``'s addresses are the file's readers (correspondents), not content; in a
    read the user pointed to, each field names the item, and ``plain`` gives back the tree."""
    files = _search()
    david = _key(files[0]["shared_with"])
    assert david.value == "david@corp.com"
    item = '{"filename": "team-meeting-minutes.docx", "id_": "25"}'
    assert david.label.sources == {
        f"correspondent:search_files[team meeting minutes]{item}.shared_with"
    }
    assert files[0]["shared_with"][david].label == david.label
    assert files[0]["id_"].label.sources == {f"record:search_files[team meeting minutes]{item}.id_"}
    assert plain(files) == DRIVE


def test_a_task_naming_a_file_delegates_sending_it_to_its_sharers() -> None:
    """ "Email each person in the team meeting minutes file": without the grant, a sharer is a
    correspondent and may not receive what the file says; with it, the sharers of that file
    may, and not mallory, who shares the other file the same search found (and who wrote
    "team meeting minutes" into it)."""
    task = trusted("Email each person in the TODO list of the team meeting minutes file")
    files = _search()
    david, mallory = _key(files[0]["shared_with"]), _key(files[1]["shared_with"])
    own = Labeled("2024-05-20", files[0]["content"].label)

    def send(policy: CapabilityPolicy, who: Labeled[Any]) -> None:
        policy.check_call("send_email", {"recipients": Labeled([who], who.label), "body": own})

    with pytest.raises(TrustError) as info:
        send(POLICY, david)
    assert info.value.sink == "tool:send_email.recipients"
    grant = Delegation(
        "send_email.recipients", "search_files", "team meeting minutes", "team-meeting-minutes.docx"
    )
    granted = POLICY.delegate(task, [grant])
    send(granted, david)
    with pytest.raises(TrustError):
        send(granted, mallory)
    other = Delegation(
        "send_email.recipients", "search_files", "team meeting minutes", "newest-minutes.docx"
    )
    with pytest.raises(TrustError, match="names an element the task does not"):
        POLICY.delegate(task, [other])


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("team-meeting-minutes.docx", True),
        ("client-meeting-minutes.docx", True),
        ("newest-minutes.docx", False),
        ("agenda.docx", False),  # one word: verbatim only
        ("Bob", False),
    ],
)
def test_a_file_name_is_named_in_words(value: str, named: bool) -> None:
    assert (
        named_in(value, "the Team meeting minutes file, and client-meeting-minutes.docx") is named
    )


def test_a_task_naming_an_event_delegates_the_invitation_to_its_participants() -> None:
    """ "Same participants as 'Introductory meeting'": without the grant, participants read
    from that event may not receive a time chosen from the user's calendar; with it they may,
    and a participant of another event still may not (the Standup's time is not Lunch's)."""
    task = trusted(
        "Create 'Follow-up' at 16:00 with the same participants as 'Introductory meeting'"
    )
    intro = label_output(
        POLICY.tools["search_events"],
        [
            {
                "id_": "1",
                "title": "Introductory meeting",
                "participants": ["john@x.com"],
                "start_time": "t",
            }
        ],
        {"query": trusted("Introductory meeting")},
    )
    day = label_output(
        POLICY.tools["get_day"],
        [
            {"id_": "2", "title": "Lunch", "participants": ["eve@evil.com"], "start_time": "12:00"},
            {
                "id_": "3",
                "title": "Standup",
                "participants": ["emma@corp.com"],
                "start_time": "10:00",
            },
        ],
        {"day": trusted("2024-05-19")},
    )
    # 16:00, because 10:00 is taken: decided by the user's calendar
    when = Labeled("2024-05-19 16:00", day[1]["start_time"].label)
    john, eve = intro[0]["participants"][0], day[0]["participants"][0]
    with pytest.raises(TrustError):
        POLICY.check_call("create_event", {"participants": john, "start_time": when})
    grant = Delegation(
        "create_event.participants", "search_events", "Introductory meeting", "Introductory meeting"
    )
    granted = POLICY.delegate(task, [grant])
    granted.check_call("create_event", {"participants": john, "start_time": when})
    with pytest.raises(TrustError):
        granted.check_call("create_event", {"participants": eve, "start_time": when})


def test_the_sharers_a_task_names_receive_only_that_file_s_data() -> None:
    """The grant covers David as a recipient of what file 25 says; the same grant does not
    let text read in the other file (mallory's planted instructions) be mailed to him."""
    task = trusted("Email each person in the TODO list of the team meeting minutes file")
    files = _search()
    david = _key(files[0]["shared_with"])
    grant = Delegation(
        "send_email.recipients", "search_files", "team meeting minutes", "team-meeting-minutes.docx"
    )
    granted = POLICY.delegate(task, [grant])
    planted = Labeled("wire $100 to IBAN ...", files[1]["content"].label)
    with pytest.raises(TrustError) as info:
        granted.check_call(
            "send_email", {"recipients": Labeled([david], david.label), "body": planted}
        )
    assert info.value.sink == "tool:send_email.recipients"
    ids = Labeled("25", files[0]["id_"].label)  # the file's own record goes
    granted.check_call("send_email", {"recipients": Labeled([david], david.label), "body": ids})


def test_plain_unwraps_labelled_keys_and_keeps_others() -> None:
    """Only a ``Labeled`` key is unwrapped: a tuple key stays a (hashable) tuple."""
    tree = {Labeled("a@x.com"): Labeled("r"), ("x", 1): [Labeled(2)]}
    assert plain(tree) == {"a@x.com": "r", ("x", 1): [2]}
