"""The options that say which approvals an executor runs (`reviewer.signing.options` declares them
for `reviewer run` and `reviewer mcp-gate`), read here, once, into what the agent library's `Gate`
takes: `--allowed-signers FILE` (the team's OpenSSH allowed-signers file, read as
`AllowedSigners.read` reads it), `--signatures N` and `--ledger PATH`.

The library's rules, not new ones: an executor that checks signatures keeps a ledger (`LedgerRequired`),
here the state folder's unless `--ledger` moves it; without `--allowed-signers` the queue's word is
trusted as `Gate` trusts it, and a `--ledger` alone still refuses an approval this host ran. Everything
that can be found wrong before the run (a file that does not read, a quorum it cannot reach, a ledger
that does not read) is refused at the start in one line, not found out after a plan was approved.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

from reviewer.agent.ledger import Ledger, LedgerError, default_ledger
from reviewer.plan.sanitize import safe_text
from reviewer.private_files import private_folder
from reviewer.signing.allowed_signers import AllowedSigners, AllowedSignersError
from reviewer.signing.passkeys import AllowedPasskeys, AllowedPasskeysError


class BadSignerOption(ValueError):
    """An `--allowed-signers`, `--signatures` or `--ledger` that cannot be used; the message says which."""


@dataclass(frozen=True)
class ApprovalTrust:
    """What an executor asks of an approval beyond the queue's word, as `Gate` takes it."""

    allowed_signers: AllowedSigners | None = None
    signatures_required: int = 1
    ledger: Path | None = None
    source: str | None = None
    """The allowed-signers file's path, for the start line."""

    def describe(self) -> str | None:
        """One line for the start: whose signatures an approval needs, and where the ledger is."""
        if self.allowed_signers is None:
            return f"approvals: the queue's word; ledger {self.ledger}" if self.ledger is not None else None
        return (
            f"approvals: {self.signatures_required} signature(s) of the people in {self.source} "
            f"(the queue's word is not enough); ledger {self.ledger}"
        )


def trust_from_options(options: argparse.Namespace) -> ApprovalTrust:
    """What `add_signer_options`' options ask of an approval; `BadSignerOption` saying what is wrong."""
    required = 1 if options.signatures is None else options.signatures
    passkeys_file = getattr(options, "allowed_passkeys", None)
    if options.allowed_signers is None and passkeys_file is None:
        if options.signatures is not None:
            raise BadSignerOption(
                "--signatures counts signatures of --allowed-signers FILE (or --allowed-passkeys FILE): "
                "name the file"
            )
        return ApprovalTrust(ledger=_usable_ledger(options.ledger) if options.ledger else None)
    if required < 1:
        raise BadSignerOption(f"--signatures must be 1 or more, not {required}")
    try:
        allowed = (
            AllowedSigners.read(options.allowed_signers) if options.allowed_signers else AllowedSigners()
        )
    except AllowedSignersError as error:
        raise BadSignerOption(f"--allowed-signers: {safe_text(str(error))}") from None
    if passkeys_file is not None:
        try:
            allowed = replace(allowed, passkeys=AllowedPasskeys.read(passkeys_file))
        except AllowedPasskeysError as error:
            raise BadSignerOption(f"--allowed-passkeys: {safe_text(str(error))}") from None
    keys = {signer.key.blob for signer in allowed.signers if not signer.cert_authority}
    reviewers = allowed.passkeys.reviewers()
    named = [
        f"{option} {safe_text(str(path))}"
        for option, path in (
            ("--allowed-signers", options.allowed_signers),
            ("--allowed-passkeys", passkeys_file),
        )
        if path is not None
    ]
    if len(keys) + len(reviewers) < required:
        counted = f"{len(keys)} key(s)" + (
            f" and {len(reviewers)} reviewer(s) with passkeys" if passkeys_file else ""
        )
        raise BadSignerOption(
            f"{' and '.join(named)} {'names' if len(named) == 1 else 'name'} {counted}, and --signatures "
            f"{required} asks for {required} distinct people: no approval could ever run"
        )
    sources = " and ".join(str(path) for path in (options.allowed_signers, passkeys_file) if path is not None)
    return ApprovalTrust(
        allowed,
        required,
        _usable_ledger(options.ledger or default_ledger(), default=options.ledger is None),
        sources,
    )


def _usable_ledger(path: Path, *, default: bool = False) -> Path:
    """`path`, once its folder is there (the default's is made, 0700) and what it holds reads: a
    ledger that cannot be kept would refuse every approval after a reviewer approved it."""
    if default:
        try:
            private_folder(path.parent)
        except OSError as error:
            raise BadSignerOption(f"the ledger's folder cannot be made: {safe_text(str(error))}") from None
    elif not path.parent.is_dir():
        raise BadSignerOption(
            f"--ledger {safe_text(str(path))}: the folder {safe_text(str(path.parent))} does not exist"
        )
    try:
        Ledger(path).entries()
    except LedgerError as error:
        raise BadSignerOption(f"--ledger: {safe_text(str(error))}") from None
    return path
