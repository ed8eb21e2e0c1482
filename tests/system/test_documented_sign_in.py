"""docs/operating.md's local OpenID provider, run as the page gives it: its `idp/provider.mjs` and its
commands, then alice signs in with the device grant and the queue takes her for a reviewer, which it
does only when the provider put her groups in the ID token. The one change: the ports it listens on."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.oidc import MODULE, require_provider, signed_in_by
from tests.service.ports import free_port
from tests.system.documented import Shell, as_run, documented_block, fenced
from tests.system.test_documented_setups import serve, shell_in

PROVIDER_FILE = fenced("operating.md", "// An OpenID provider", "js")


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    started = shell_in(tmp_path)
    yield started
    started.close()


def test_the_pages_provider_signs_alice_in_as_a_reviewer(shell: Shell) -> None:
    require_provider()
    (shell.folder / "idp").mkdir()
    (shell.folder / "idp" / "provider.mjs").write_text(PROVIDER_FILE)
    (shell.folder / "idp" / "node_modules").symlink_to(MODULE.parent)  # what `npm install --prefix idp` makes
    provider_line, serve_line, login_line = documented_block("operating.md", "npm install --prefix idp")
    provider_port, queue_port = free_port(), free_port()
    shell.env["PORT"] = str(provider_port)
    log = shell.start(as_run(provider_line, {}))
    deadline = time.monotonic() + 30
    while f"serving http://127.0.0.1:{provider_port}" not in log.read_text(errors="replace"):
        assert shell.background[-1].poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    issuer = {"http://127.0.0.1:4000": f"http://127.0.0.1:{provider_port}"}
    url = serve(shell, as_run(serve_line, issuer), queue_port)
    login = shell.popen(as_run(login_line, {"http://127.0.0.1:8470": url}))
    code, out, err, page = signed_in_by(login, "alice")
    assert code == 0 and page == "Sign-in Success", err
    assert re.search(rf"signed in to {url} as alice@example\.com \(reviewer\) through http://127", out), out
