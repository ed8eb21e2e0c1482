"""An allowed-signers corpus whose every verdict is `ssh-keygen -Y verify`'s on the same bytes.

For each file, each principal and each key's signature, at each verification time: whether OpenSSH
verifies it, and whether `AllowedSigners` allows it, must agree. A file this reader refuses must name
one line, and OpenSSH must read the file exactly as if that line were not there (it skips a line it
cannot read; an executor refuses the whole file instead, failing closed).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reviewer.signing.allowed_signers import AllowedSigners, AllowedSignersError
from reviewer.signing.sshsig import NAMESPACE, PublicKey, sign, signer_for
from tests.signing.ssh import make_key

MESSAGE = b"an approval statement"
PRINCIPALS = ("alice", "bob", "carol")
KEYS = ("alice", "alice2", "bob", "carol")
"""alice2 is alice's second key: it must never sign as bob."""
TIMES = ("20291231235959Z", "20300101000000Z", "20300101000001Z")
"""Around the corpus's bounds, for the cases about time; the others are checked at the second."""

CORPUS: dict[str, bytes] = {
    "plain": b"alice {alice}\nbob {bob}\n",
    "comments and blank lines": b"# bob {alice2}\n   # bob {alice2}\n\t#bob {alice2}\n\n \t\nalice {alice}\n",
    "CRLF": b"alice {alice}\r\nbob {bob} bob@laptop\r\n\r\n",
    "a trailing CR at the end": b"alice {alice}\r",
    "no newline at the end": b"carol {carol}",
    "a lone CR hides a line in a comment": b"alice {alice} alice@laptop\rbob {alice2}\n",
    "U+0085 hides a line in a comment": "alice {alice} alice@laptop\u0085bob {alice2}\n".encode(),
    "U+2028 hides a line in a comment": "alice {alice} alice@laptop\u2028bob {alice2}\n".encode(),
    "a form feed hides a line in a comment": b"alice {alice} alice@laptop\fbob {alice2}\n",
    "a vertical tab hides a line in a comment": b"alice {alice} alice@laptop\vbob {alice2}\n",
    "NUL ends a line": b"alice {alice} x\0bob {alice2}\nbob {bob}\n",
    "tabs between fields": b"bob\t{bob_tab}\t comment\n",
    "NBSP is not a separator after the principals": "bob\u00a0{bob}\nalice {alice}\n".encode(),
    "NBSP is not a separator inside the key": b"alice {alice}\nbob {bob_nbsp}\n",
    "a CR is a separator after the principals": b"bob\r{bob}\n",
    "a CR is not a separator inside the key": b"alice {alice}\nbob {bob_cr}\n",
    "a leading CR": b"\rbob {alice2}\nalice {alice}\n",
    "a quoted principal list": b'"alice,bob" {alice}\n',
    "a quote inside the principals": b'b"o"b {bob}\ncarol {carol}\n',
    "patterns and negation": b"*,!bob {alice}\nb?b {bob}\n",
    "an empty sub-pattern": b"bob,,carol {carol}\n",
    "a confusable principal": "b\u043eb {alice2}\nbob {bob}\n".encode(),
    "namespaces": b'bob namespaces="reviewer-decision@v1" {bob}\ncarol namespaces="git" {carol}\n',
    "option names in any case": b'bob NAMESPACES="reviewer-*" {bob}\nalice Cert-Authority {alice}\n',
    "cert-authority never matches a plain key": b"bob cert-authority {bob}\ncarol {carol}\n",
    "an unquoted option value": b"bob namespaces=reviewer-decision@v1 {bob}\ncarol {carol}\n",
    "a repeated option": b'bob namespaces="a",namespaces="b" {bob}\ncarol {carol}\n',
    "options ending in a comma": b'bob namespaces="*", {bob}\ncarol {carol}\n',
    "an unknown option": b"bob frobnicate {bob}\ncarol {carol}\n",
    "a damaged key before a good one": b"bob ssh-ed25519 !!!!\nbob {bob}\n",
    "a key type that does not match its key": b"carol ssh-rsa {carol_blob}\nbob {bob}\n",
    "valid-after": b'bob valid-after="20300101Z" {bob}\n',
    "valid-before": b'bob valid-before="20300101Z" {bob}\n',
    "valid-before in UTC spelled out": (
        b'bob valid-before="20300101UTC" {bob}\ncarol valid-before="20300101utc" {carol}\n'
    ),
    "a second 60 rolls over": b'bob valid-after="20291231235960Z" {bob}\n',
    "February 30 rolls over": b'bob valid-before="20290230Z" {bob}\ncarol {carol}\n',
    "hours and minutes": b'bob valid-after="202912312359Z",valid-before="203001010000Z" {bob}\n',
    "valid-before not after valid-after": b'bob valid-after="20300101Z",valid-before="20300101Z" {bob}\n',
    "local time": b'bob valid-after="20300101" {bob}\ncarol valid-before="20300101010000" {carol}\n',
    "a day 32": b'bob valid-before="20291232Z" {bob}\ncarol {carol}\n',
    "a month 13": b'bob valid-after="20301301Z" {bob}\ncarol {carol}\n',
    "seven digits": b'bob valid-before="2030010Z" {bob}\ncarol {carol}\n',
    "the epoch itself": b'bob valid-after="19700101Z" {bob}\ncarol {carol}\n',
    "a date in words": b'bob valid-before="yesterday" {bob}\ncarol {carol}\n',
}


@dataclass(frozen=True)
class Team:
    folder: Path
    publics: dict[str, PublicKey]
    signatures: dict[str, Path]

    def holds(self, content: bytes, key_name: str) -> bool:
        """Whether the key's base64 appears in `content` at all."""
        return self.publics[key_name].openssh().split(" ")[1].encode() in content

    def render(self, template: bytes) -> bytes:
        fields = {name: key.openssh().encode() for name, key in self.publics.items()}
        bob_type, bob_blob = fields["bob"].split(b" ")
        fields |= {
            "bob_tab": bob_type + b"\t" + bob_blob,
            "bob_nbsp": bob_type + "\u00a0".encode() + bob_blob,
            "bob_cr": bob_type + b"\r" + bob_blob,
            "carol_blob": fields["carol"].split(b" ")[1],
        }
        for name, value in fields.items():
            template = template.replace(b"{" + name.encode() + b"}", value)
        return template


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Team:
    folder = tmp_path_factory.mktemp("corpus")
    made = {name: make_key(folder, name) for name in KEYS}
    signatures = {}
    for name, key in made.items():
        signature = folder / f"{name}.sig"
        signature.write_text(sign(MESSAGE, signer_for(key.private)))
        signatures[name] = signature
    return Team(folder, {name: key.public for name, key in made.items()}, signatures)


TIMED = {case for case, template in CORPUS.items() if b"valid-" in template}


@pytest.fixture
def time_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Local times are read in the zone both readers run in, one an hour off UTC in winter."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield "Europe/Berlin"
    monkeypatch.undo()
    time.tzset()


def ssh_keygen_verdicts(team: Team, content: bytes, at: str) -> dict[tuple[str, str], bool]:
    """(principal, signing key) -> whether `ssh-keygen -Y verify` accepts it (run side by side: each
    call mostly waits to start)."""
    allowed = team.folder / "allowed_signers"
    allowed.write_bytes(content)
    environ = os.environ.copy()

    def verify(principal: str, signature: Path) -> bool:
        verified = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", principal, "-n", NAMESPACE]
            + ["-s", str(signature), f"-Overify-time={at}"],
            input=MESSAGE,
            capture_output=True,
            env=environ,
        )
        return verified.returncode == 0

    pairs = [(principal, key_name) for principal in PRINCIPALS for key_name in team.signatures]
    # A key the file does not hold verifies nothing for either reader: only ask about the others.
    asked = [pair for pair in pairs if pair[1] == "alice2" or team.holds(content, pair[1])]
    verdicts = dict.fromkeys(pairs, False)
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = pool.map(lambda pair: verify(pair[0], team.signatures[pair[1]]), asked)
        verdicts.update(zip(asked, answers, strict=True))
    return verdicts


def our_verdicts(team: Team, signers: AllowedSigners, at: str) -> dict[tuple[str, str], bool]:
    moment = datetime.strptime(at, "%Y%m%d%H%M%SZ").replace(tzinfo=UTC)
    return {
        (principal, key_name): signers.allows(principal, team.publics[key_name], NAMESPACE, moment)
        for principal in PRINCIPALS
        for key_name in team.signatures
    }


def readings(team: Team, case: str) -> tuple[bytes, AllowedSigners]:
    """The file's bytes and what this reader takes from them: all of it, or, when it refuses the
    file naming a line, the file without that line."""
    content = team.render(CORPUS[case])
    text = content.decode()
    try:
        signers = AllowedSigners.parse(text, "corpus")
    except AllowedSignersError as refused:
        # The refusal names one line; OpenSSH must read the file as if that line were absent.
        number = int(str(refused).split(" line ", 1)[1].split(":", 1)[0])
        lines = text.split("\n")
        signers = AllowedSigners.parse("\n".join(lines[: number - 1] + lines[number:]), "corpus")
    return content, signers


@pytest.mark.parametrize("case", list(CORPUS))
def test_every_verdict_is_ssh_keygens(team: Team, case: str) -> None:
    content, signers = readings(team, case)
    for at in TIMES if case in TIMED else TIMES[1:2]:
        assert our_verdicts(team, signers, at) == ssh_keygen_verdicts(team, content, at), (case, at)


def test_local_times_are_read_in_the_local_zone_as_openssh_reads_them(team: Team, time_zone: str) -> None:
    content, signers = readings(team, "local time")
    for at in ("20291231225959Z", "20291231230000Z", "20300101000000Z", "20300101000001Z"):
        assert our_verdicts(team, signers, at) == ssh_keygen_verdicts(team, content, at), at


def test_the_hidden_line_attack_gives_bob_nothing(team: Team) -> None:
    """One person's second key, hidden after a lone CR in the comment of their first, never signs as
    bob: OpenSSH reads one line, and so does the executor."""
    signers = AllowedSigners.parse(team.render(CORPUS["a lone CR hides a line in a comment"]).decode())
    assert [signer.principals for signer in signers.signers] == [("alice",)]
    assert not signers.allows("bob", team.publics["alice2"], NAMESPACE)


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("alice\n", "line 1: expected"),
        ("# comment\n\nalice ssh-ed25519 !!!!\n", "line 3: no valid key"),
        ('bob {key}\nalice frobnicate="1" {key}\n', "line 2: unsupported option at 'frobnicate"),
        ('alice valid-after="yesterday" {key}\n', "line 1: the valid-after time 'yesterday'"),
        ('alice valid-before="20261301Z" {key}\n', "line 1: the valid-before time '20261301Z'"),
        ('alice valid-before="00000101Z" {key}\n', "line 1: the valid-before time"),
        ('alice valid-before="99999999" {key}\n', "line 1: the valid-before time"),
        ("\n\nalice namespaces=git {key}\n", "line 3: an option value must be in double quotes"),
        ('"alice {key}\n', "line 1: a quote is not closed"),
        ("alice ssh-dss AAAAB3NzaC1kc3MAAACBAP\n", "line 1:"),
    ],
)
def test_a_broken_file_is_an_allowed_signers_error_naming_the_line(
    team: Team, template: str, problem: str
) -> None:
    text = template.replace("{key}", team.publics["alice"].openssh())
    with pytest.raises(AllowedSignersError, match=problem.replace("(", r"\(")):
        AllowedSigners.parse(text, "team_signers")
