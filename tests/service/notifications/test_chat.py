"""Chat and paging services through Apprise: its own `json://` target on loopback gets the events from
the real service, and an agent's hostile title reaches Slack as plain text, checked in the payload
Apprise's Slack plugin would post."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reviewer.service.notifications.chat import ChatSender, chat_text, inert
from reviewer.service.notifications.sender import NotifyRefused
from reviewer.service.store import Delivery
from tests.queue_harness import Service, decide, submit
from tests.service.notifications.receiver import Receiver

apprise = pytest.importorskip("apprise", reason="the notify extra: pip install 'reviewer[notify]'")

HOSTILE_TITLE = "<!channel> <http://x|click> @here & friends"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


def delivery(document: dict[str, Any]) -> Delivery:
    return Delivery(
        1,
        "e1",
        document["event"],
        "p",
        "slack",
        json.dumps(document).encode(),
        "pending",
        0,
        0,
        0,
        1,
        None,
        None,
    )


def waiting(title: str) -> dict[str, Any]:
    return {
        "event": "proposal.waiting",
        "proposal_id": "deskline-merge-0042",
        "revision": 1,
        "title": title,
        "agent": "@channel-bot",
        "api": "deskline",
        "environment": "production",
        "calls": 3,
        "plan_sha256": "ab" * 32,
        "waited_seconds": 0,
        "open": "reviewer review deskline-merge-0042",
    }


def test_apprise_json_target_on_loopback_gets_the_events_from_serve(
    tmp_path: Path, receiver: Receiver
) -> None:
    target = f"json://127.0.0.1:{receiver.port}/hook"
    service = Service(
        db=tmp_path / "queue.sqlite3", log_path=tmp_path / "service.log", serve_args=("--notify", target)
    )
    service.start()
    try:
        agent = service.client(service.token("agent", "agent"))
        alice = service.client(service.token("alice", "reviewer"))
        digest = submit(agent, "chat-0001", title=HOSTILE_TITLE)["plan_sha256"]
        assert decide(alice, "chat-0001", 1, digest).status_code == 201
        first, second = (json.loads(arrival.body) for arrival in receiver.wait_for(2))
        assert first["title"].startswith("Waiting for review: ")
        assert "Open it: reviewer review chat-0001" in first["message"]
        assert "@here" not in first["title"] and "@\u2060here" in first["title"]
        assert second["title"].startswith("Approved by alice: ")
        agent.close()
        alice.close()
    finally:
        service.stop()


def captured_posts(
    monkeypatch: pytest.MonkeyPatch, requests: object, function: str, status: int
) -> list[dict[str, Any]]:
    """The JSON payloads an Apprise plugin posts through `requests.<function>`, answered `status`
    and never sent; each call is checked not to follow a redirect."""
    posted: list[dict[str, Any]] = []

    class Answer:
        status_code = status
        content = b"ok"
        text = "ok"
        headers: dict[str, str] = {}

    def capture(*args: Any, data: str | bytes | None = None, **kwargs: Any) -> Answer:
        assert kwargs["allow_redirects"] is False
        posted.append(json.loads(data or "{}"))
        return Answer()

    monkeypatch.setattr(requests, function, capture)
    return posted


def test_a_hostile_title_reaches_slack_as_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from apprise.plugins import slack

    posted = captured_posts(monkeypatch, slack.requests, "request", 200)
    sender = ChatSender("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ")
    sender.send(delivery(waiting(HOSTILE_TITLE)))
    (payload,) = posted
    sent = json.dumps(payload, ensure_ascii=False)
    assert "<!channel>" not in sent and "<http" not in sent and "@here" not in sent
    assert payload["mrkdwn"] is False
    title, body = payload["attachments"][0]["title"], payload["attachments"][0]["text"]
    j = "\u2060"
    assert title == (
        f"Waiting for review: &lt;{j}!{j}channel&gt;{j} &lt;{j}http:{j}//x|{j}click&gt;{j} "
        f"@{j}here &amp; friends"
    )
    assert body.startswith("@\u2060channel-bot proposes 3 calls to deskline production")
    assert body.endswith("Open it: reviewer review deskline-merge-0042")


def test_every_event_has_a_short_text_with_the_line_that_opens_it() -> None:
    documents = [
        waiting("t"),
        {**waiting("t"), "event": "proposal.reminder", "waited_seconds": 1800},
        {
            "event": "proposal.decided",
            "title": "t",
            "decision": "reject",
            "decided_by": "bob",
            "reason": "@all no",
        },
        {"event": "run.ended", "title": "t", "ended": "completed", "calls_sent": 3, "calls_kept": 3},
        {"event": "run.unknown", "title": "t", "claimed_by": "agent"},
    ]
    titles = []
    for document in documents:
        title, body = chat_text({**document, "proposal_id": "p", "revision": 1, "open": "reviewer review p"})
        titles.append(title)
        assert body.endswith("Open it: reviewer review p")
    assert titles == [
        "Waiting for review: t",
        "Still waiting (30 min): t",
        "Rejected by bob: t",
        "Run completed: t",
        "Run outcome unknown: t",
    ]
    assert inert("mail a@b.example via https://x") == "mail a@\u2060b.\u2060example via https:\u2060//x"
    assert inert("Merge t1 and t2, then close") == "Merge t1 and t2, then close"


MARKUP = {
    "a markdown link": r"\[[^\]]*\]\(",
    "a channel or user mention": r"<[#@!&]",
    "an everyone mention": r"@(everyone|here|channel)",
    "a URL": r"://",
    "a domain": r"\w\.\w",
}
"""What would make agent text a mention, a channel, or a link a reader may follow."""


def test_a_hostile_title_reaches_discord_with_no_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    from apprise.plugins import discord

    posted = captured_posts(monkeypatch, discord.requests, "post", 204)
    hostile = "[click](evil.example) <#123> <@456> @everyone **bold** ||spoiler|| `x` https://x"
    ChatSender("discord://123456789012345678/abcdefghijklmnopqrstuvwxyzABCDEF").send(
        delivery(waiting(hostile))
    )
    (payload,) = posted
    content = payload["content"]
    assert content.startswith("Waiting for review: ")
    assert content.replace("\u2060", "").startswith(f"Waiting for review: {hostile}"), (
        "the reader sees it all"
    )
    for what, pattern in MARKUP.items():
        assert re.search(pattern, content) is None, f"{what} reached Discord: {content!r}"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("json://192.0.2.7/hook", "plain http to another host"),
        ("nosuchservice://x", "not a URL Apprise reads"),
    ],
)
def test_an_unusable_apprise_url_is_refused(url: str, says: str) -> None:
    with pytest.raises(NotifyRefused, match=says):
        ChatSender(url)


def test_an_apprise_targets_name_and_logs_show_its_scheme_only() -> None:
    from reviewer.service.notifications.logs import secret_parts
    from reviewer.service.notifications.sender import target_name

    url = "pagerduty://integration0key@api0key0secret"
    assert target_name(url).startswith("pagerduty:// #") and "0key" not in target_name(url)
    assert {"integration0key", "api0key0secret"} <= set(secret_parts(url))
    assert secret_parts("https://hooks.example/reviewer") == [], "an ordinary word is hidden in its URL only"


def test_a_waiting_page_says_what_the_plan_does_in_one_line() -> None:
    """The event's `summary` is the body's second line, made inert like every agent-written text."""
    summary = "6 updates, 3 deletes in production; 1 real refusal; 3 deletes: namespace @here"
    _title, text = chat_text({**waiting("Scale shop"), "summary": summary})
    lines = text.splitlines()
    assert lines[0] == "@\u2060channel-bot proposes 3 calls to deskline production"
    assert lines[1] == inert(summary) and "@\u2060here" in lines[1]
