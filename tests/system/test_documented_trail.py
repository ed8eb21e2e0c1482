"""docs/trail.md's set-up and checks, run as the page writes them: a key made with ssh-keygen, a
queue serving with it, an auditor's token; three decisions; then the checkpoint kept, the export
taken and verified against it, one entry proven and verified, and the export taken again after an
edit of the database, where it must fail naming the entry."""

from __future__ import annotations

import sqlite3
import subprocess

from tests.queue_harness import decide, mint_tokens, submit
from tests.service.ports import free_port
from tests.system import test_documented_setups as setups
from tests.system.documented import Shell, as_run, documented_block
from tests.system.test_documented_setups import client, serve

shell = setups.shell
"""The set-ups' fixture: a shell in the test's folder, the user's folders in it."""

KEY = {"/etc/reviewer/trail_key": "trail_key"}


def test_the_trail_page_s_commands_set_it_up_export_and_verify_and_an_edit_fails(shell: Shell) -> None:
    keygen, served, auditor = documented_block("trail.md", "ssh-keygen -t ed25519")
    shell.run(as_run(keygen, KEY))
    url = serve(shell, as_run(served, KEY), free_port())
    audit_token = shell.run(as_run(auditor, {})).stdout.strip()
    tokens = mint_tokens(shell.folder / "queue.sqlite3", {"alice": "reviewer", "agent": "agent"})
    for number, decision in enumerate(("approve", "reject", "approve")):
        with client(url, tokens["agent"]) as agent:
            digest = submit(agent, f"page-{number}")["plan_sha256"]
        with client(url, tokens["alice"]) as alice:
            assert decide(alice, f"page-{number}", 1, digest, decision, reason="no").status_code == 201

    shell.env["REVIEWER_TOKEN"] = audit_token
    at_the_queue = {"https://queue.example": url}
    checkpoint, export, verify, prove, verify_proof = documented_block(
        "trail.md", "reviewer trail checkpoint"
    )
    shell.run(as_run(checkpoint, at_the_queue))
    shell.run(as_run(export, at_the_queue))
    verified = shell.run(as_run(verify, {})).stdout
    assert "verified: 6 entries from entry 0" in verified and "extends the checkpoint seen before" in verified
    shell.run(as_run(prove, at_the_queue))
    assert "verified: entry 3 is in the checkpoint" in shell.run(as_run(verify_proof, {})).stdout

    with sqlite3.connect(shell.folder / "queue.sqlite3") as db:  # a writer who bypasses the triggers
        db.execute("DROP TRIGGER trail_log_no_update")
        db.execute("UPDATE trail_log SET leaf = replace(leaf, '\"rejected\"', '\"approved\"')")
    db.close()
    shell.run(as_run(export, at_the_queue))
    failed = subprocess.run(
        ["bash", "-c", as_run(verify, {})], cwd=shell.folder, env=shell.env, capture_output=True, text=True
    )
    assert failed.returncode == 1
    assert "entry 3 (approved: proposal page-1 revision 1 by alice)" in failed.stderr
