"""The live app under a policy of two: the quorum so far, who signed, and a signed approval sent.

The queue is `httpx.MockTransport` over fixed answers (as in tests/tui/live), the signing key a fixed
ed25519 key, so fingerprints and words never vary from run to run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from reviewer.queue.config import Secret
from reviewer.queue.messages import DecisionRequest, DecisionSignature, DecisionState, TrailEvent
from reviewer.signing.sshsig import DecisionStatement, KeyFileSigner, sign_statement, verify_with_keys
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from tests.tui.live.fake_queue import AT, FakeQueue, _json
from tests.tui.live.helpers import decide_from_keyboard, open_proposal, status, until

SIZE = (100, 30)
PROPOSAL = "prod-scale-0009"


def fixed_signer(folder: Path, seed: int) -> KeyFileSigner:
    """An ed25519 key from a fixed seed, written as an OpenSSH key file only its owner can read."""
    key = ed25519.Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)
    path = folder / f"key-{seed}"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)
    return KeyFileSigner(path)


@dataclass
class QuorumQueue(FakeQueue):
    """The fake queue with a policy of `required` approvals: signed decisions are verified against
    `keys` (name to signer) like the real queue does, and returned with the decision state."""

    required: int = 2
    keys: dict[str, KeyFileSigner] = field(default_factory=dict)
    approvals: list[str] = field(default_factory=list)
    signatures: list[DecisionSignature] = field(default_factory=list)

    def _state(self, proposal_id: str) -> DecisionState:
        state = super()._state(proposal_id)
        return state.model_copy(
            update={
                "approvals": list(self.approvals),
                "approvals_required": self.required,
                "signatures_required": True,
                "signatures": list(self.signatures),
            }
        )

    def sign(self, who: str, signer: KeyFileSigner, digest: str, **changes: Any) -> None:
        fields: dict[str, Any] = {
            "proposal_id": PROPOSAL,
            "revision": 1,
            "plan_sha256": digest,
            "decision": "approve",
            "reviewer": who,
            "signed_at": "2026-10-15T09:00:00Z",
            **changes,
        }
        statement = DecisionStatement(**fields)
        self.record(who, statement.to_bytes().decode(), sign_statement(statement, signer))

    def record(self, who: str, statement: str, signature: str) -> None:
        self.approvals.append(who)
        self.signatures.append(
            DecisionSignature(
                reviewer=who,
                decision="approve",
                statement=statement,
                signature=signature,
                key_fingerprint="",
                at=AT,
            )
        )
        self.proposals[PROPOSAL].history.append(
            TrailEvent(
                seq=50 + len(self.approvals),
                at=AT,
                actor=who,
                event="approved",
                revision=1,
                plan_sha256=self.proposals[PROPOSAL].digest(1),
            )
        )

    def _decide(self, proposal_id: str, decision: DecisionRequest) -> httpx.Response:
        assert decision.statement is not None and decision.signature is not None, "an unsigned decision"
        statement, _key = verify_with_keys(
            decision.statement, decision.signature, [self.keys[self.me.name].public_key]
        )
        assert (
            statement.names(proposal_id, decision.revision, decision.plan_sha256, decision.decision) is None
        )
        self.record(self.me.name, decision.statement, decision.signature)
        if len(self.approvals) >= self.required:
            entry = self.proposals[proposal_id]
            entry.state, entry.decided_by = "approved", ", ".join(self.approvals)
        return _json(self._state(proposal_id), 201)


def quorum_queue(folder: Path) -> QuorumQueue:
    fake = QuorumQueue(keys={"alice": fixed_signer(folder, 1), "bob": fixed_signer(folder, 2)})
    fake.add(PROPOSAL, title="Scale the shop down to 2 replicas", calls=3)
    return fake


def live_app(fake: QuorumQueue, signer: KeyFileSigner | None = None) -> ReviewerApp:
    return ReviewerApp(
        QueueSource(
            "http://queue.test",
            Secret("snapshot-token"),
            transport=fake.transport(),
            clock=lambda: 1000.0,
            now=lambda: AT + timedelta(minutes=12),
            poll_interval=60,
            retry_base=30,
            max_backoff=30,
            jitter=0,
            signer=signer,
        )
    )


def test_one_of_two_approvals_and_who_signed(snap_compare, tmp_path: Path) -> None:
    """The queue under a policy of two: the detail under the table reads "queue: pending · 1 of 2
    approvals (bob)" and a "signed:" line with "bob approved ✓ SHA256:…" in green (a valid signature
    over this revision and digest) and "carol ✗ … does not verify …" in bold red (a signature over
    other bytes, as a tampered queue would return). The trail lists "approved r1 (bob)"."""
    fake = quorum_queue(tmp_path)
    digest = fake.proposals[PROPOSAL].digest(1)
    fake.sign("bob", fake.keys["bob"], digest)
    carol = fixed_signer(tmp_path, 3)
    honest = DecisionStatement(PROPOSAL, 1, "0" * 64, "approve", "carol", "2026-10-15T09:00:00Z")
    forged = DecisionStatement(PROPOSAL, 1, digest, "approve", "carol", "2026-10-15T09:00:00Z")
    fake.record("carol", forged.to_bytes().decode(), sign_statement(honest, carol))
    fake.approvals.remove("carol")

    async def run_before(pilot: Any) -> None:
        await until(
            pilot, lambda: len(pilot.app.queue_screen.items) >= 1 and "answered" in status(pilot.app), "rows"
        )
        await pilot.pause()

    assert snap_compare(live_app(fake), terminal_size=SIZE, run_before=run_before)


def test_a_signed_approval_counts_toward_the_quorum(snap_compare, tmp_path: Path) -> None:
    """alice opens the proposal and approves (`enter`, `a`, `y`) with her key configured: the queue
    verified her signature (the fake checks it as the real queue does) and the banner says "your
    approval counts: 1 of 2 approvals (alice) (signed); revision 1 waits for more" (the banner at the
    bottom, and whole in the "Decision" toast over it); the chrome ends with "pending · 1 of 2
    approvals", the names cut at 100 columns."""
    fake = quorum_queue(tmp_path)
    app = live_app(fake, signer=fake.keys["alice"])

    async def run_before(pilot: Any) -> None:
        await until(
            pilot, lambda: len(pilot.app.queue_screen.items) >= 1 and "answered" in status(pilot.app), "rows"
        )
        await open_proposal(pilot, pilot.app, PROPOSAL)
        await decide_from_keyboard(pilot, "a", "y")
        await until(pilot, lambda: bool(pilot.app.screen.query_one("#decision").display), "the answer")
        await until(pilot, lambda: "1 of 2" in str(pilot.app.screen.query_one("Chrome").render()), "chrome")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
    assert fake.approvals == ["alice"]
