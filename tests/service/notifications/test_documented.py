"""docs/notifications.md says what the code does: its signature check accepts a real delivery, and
refuses another secret or a changed body; its Apprise URLs are URLs serve accepts."""

from __future__ import annotations

import base64
import re
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import stripe

from reviewer.queue.config import configured_alerts
from reviewer.service.notifications.targets import read_secret
from reviewer.service.notifications.webhook import WebhookSender
from reviewer.service.store import Delivery, events
from tests.service.notifications.receiver import Arrival, Receiver

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


def delivered(secret: bytes, event_id: str = "e1") -> Arrival:
    """What a receiver on loopback got from the service's webhook sender under `secret`."""
    receiver = Receiver().start()
    sender = WebhookSender(receiver.url, secret)
    document = {"format": events.FORMAT, "event": "proposal.waiting", "open": "reviewer review p"}
    body = events.encode(document, event_id)
    try:
        sender.send(
            Delivery(
                1, event_id, "proposal.waiting", "p", sender.name, body, "pending", 0, 0, 0, 0, None, None
            )
        )
        (arrival,) = receiver.wait_for(1)
    finally:
        sender.close()
        receiver.stop()
    return arrival


def test_the_documented_check_accepts_a_real_delivery_and_nothing_else() -> None:
    verify = documented_verify()
    arrival = delivered(b"the-shared-secret")
    header = arrival.headers["reviewer-signature"]
    assert verify(header, arrival.body, b"the-shared-secret")
    assert not verify(header, arrival.body, b"another secret")
    assert not verify(header, arrival.body.replace(b"review p", b"review q"), b"the-shared-secret")
    assert not verify(header, arrival.body.replace(b'"e1"', b'"e2"'), b"the-shared-secret")


def test_stripes_library_checks_a_real_delivery_signed_with_the_documented_secret_file(
    tmp_path: Path,
) -> None:
    """The secret file made by the page's own command, read by `serve`, signs a delivery that the
    page's Stripe snippet accepts with the secret the page says to read; not with the decoded bytes."""
    make_secret = block("", "head -c 32 /dev/urandom").splitlines()[0]
    subprocess.run(["bash", "-c", make_secret], cwd=tmp_path, check=True)
    path = tmp_path / "notify-secret"
    namespace: dict[str, Any] = {}
    exec(compile(block("python", "import stripe"), str(DOC), "exec"), namespace)
    verified_event = namespace["verified_event"]
    arrival = delivered(read_secret(path))
    header = arrival.headers["reviewer-signature"]
    secret = path.read_text().strip()  # as the page says
    assert verified_event(arrival.body, header, secret)["id"] == arrival.delivery
    for wrong in (path.read_text(), "another"):  # the text with its newline, another secret
        with pytest.raises(stripe.SignatureVerificationError):
            verified_event(arrival.body, header, wrong)
    assert not documented_verify()(header, arrival.body, base64.b64decode(secret)), "not the decoded bytes"
    with pytest.raises(stripe.SignatureVerificationError):
        verified_event(arrival.body.replace(b'"e1"', b'"e2"'), header, secret)


def test_the_documented_alerts_table_is_read_by_the_app(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(block("toml", "[alerts]"))
    assert configured_alerts(path).desktop == "osc9"


def test_the_documented_apprise_urls_are_accepted() -> None:
    pytest.importorskip("apprise", reason="the notify extra: pip install 'reviewer-gate[notify]'")
    from reviewer.service.notifications.chat import ChatSender
    from reviewer.service.notifications.targets import split_events

    command = block("", "pip install 'reviewer-gate[notify]'")
    chosen = [split_events(value) for value in re.findall(r"--notify '([^']+)'", command)]
    for chosen_events, url in chosen:
        ChatSender(url, events=chosen_events)
    assert [chosen_events for chosen_events, _ in chosen] == [
        None,
        frozenset({"run.unknown", "proposal.reminder"}),
    ]
