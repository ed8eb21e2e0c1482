"""The queue API's bodies for passkeys and review pages (`serve --web-origin`): an enrolment link,
the passkeys registered, and a revision's review link."""

from __future__ import annotations

from datetime import datetime

from reviewer.queue.messages import Message


class EnrolmentLink(Message):
    """A one-time link (single use, ten minutes) whose page registers a passkey for `reviewer`."""

    link: str
    reviewer: str
    expires_at: datetime


class PasskeyEntry(Message):
    reviewer: str
    credential_id: str
    label: str
    added_at: datetime
    sign_count: int


class PasskeyListing(Message):
    passkeys: list[PasskeyEntry]


class ReviewLink(Message):
    """The review page of one revision: open it, read, decide with a passkey."""

    proposal_id: str
    revision: int
    review: str
