"""docs/notifications.md says what the code does: its signature check accepts a real delivery, and
refuses another secret or a changed body; its Apprise URLs are URLs serve accepts."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from reviewer.queue.config import configured_alerts
from reviewer.service.notifications.webhook import WebhookSender
from reviewer.service.store import Delivery
from tests.service.notifications.receiver import Receiver

DOC = Path(__file__).resolve().parents[3] / "docs" / "notifications.md"


def block(language: str, starting_with: str) -> str:
    for found in re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.S):
        text = textwrap.dedent(found)
        if text.startswith(starting_with):
            return text
    raise AssertionError(f"no {language} block starting with {starting_with!r} in {DOC.name}")


def documented_verify() -> Callable[[str, bytes, bytes], bool]:
    namespace: dict[str, object] = {}
    exec(compile(block("python", "import hashlib"), str(DOC), "exec"), namespace)
    return namespace["verify"]  # type: ignore[return-value]


def test_the_documented_check_accepts_a_real_delivery_and_nothing_else() -> None:
    verify = documented_verify()
    receiver = Receiver().start()
    sender = WebhookSender(receiver.url, b"the-shared-secret")
    try:
        body = b'{"event":"proposal.waiting","open":"reviewer review p"}'
        sender.send(
            Delivery(1, "e1", "proposal.waiting", "p", sender.name, body, "pending", 0, 0, 0, 0, None, None)
        )
        (arrival,) = receiver.wait_for(1)
    finally:
        sender.close()
        receiver.stop()
    header = arrival.headers["reviewer-signature"]
    assert verify(header, arrival.body, b"the-shared-secret")
    assert not verify(header, arrival.body, b"another secret")
    assert not verify(header, arrival.body.replace(b"review p", b"review q"), b"the-shared-secret")


def test_the_documented_alerts_table_is_read_by_the_app(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(block("toml", "[alerts]"))
    assert configured_alerts(path).desktop == "osc9"


def test_the_documented_apprise_urls_are_accepted() -> None:
    pytest.importorskip("apprise", reason="the notify extra: pip install 'reviewer[notify]'")
    from reviewer.service.notifications.chat import ChatSender
    from reviewer.service.notifications.targets import split_events

    command = block("", "pip install 'reviewer[notify]'")
    chosen = [split_events(value) for value in re.findall(r"--notify '([^']+)'", command)]
    for events, url in chosen:
        ChatSender(url, events=events)
    assert [events for events, _ in chosen] == [None, frozenset({"run.unknown", "proposal.reminder"})]
