"""What `reviewer run` loads to start: its gate, sandbox and queue client, and none of the libraries
that serve only a feature a run may not use (passkeys, SSH signatures, change windows, a provider's
tokens). A run that checks signed approvals loads cryptography when it reads its signers' keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FEATURE_LIBRARIES = ("webauthn", "cryptography", "croniter", "jwt")


def test_the_run_command_loads_no_feature_library_until_it_reads_a_signers_key(tmp_path: Path) -> None:
    key = tmp_path / "alice"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    probe = (
        "import sys\n"
        "import reviewer.run.commands, reviewer.run.runner\n"
        f"print(sorted(set(sys.modules) & {set(FEATURE_LIBRARIES)!r}))\n"
        "from reviewer.signing.allowed_signers import AllowedSigners\n"
        f"AllowedSigners.parse('alice ' + open({str(key) + '.pub'!r}).read())\n"
        "print('cryptography' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "True"], done.stderr
