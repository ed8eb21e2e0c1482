"""Which CA the queue's TLS certificate is checked against: one place for every command.

A queue behind a private CA is trusted through `--ca-file FILE` (each command that talks to the queue
takes it), or `SSL_CERT_FILE` / `REQUESTS_CA_BUNDLE` as other tools read them; none set, the
system's trust store. Light on purpose: commands register `--ca-file` without loading the client.
"""

from __future__ import annotations

import argparse
import os
import ssl
from pathlib import Path

CA_VARIABLES = ("REVIEWER_CA_FILE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
"""Where the CA file is named, first set wins (`--ca-file` sets the first)."""

CA_FILE_HELP = (
    "the CA file that signs the queue's TLS certificate (a private CA); the same as setting "
    "SSL_CERT_FILE or REQUESTS_CA_BUNDLE"
)


def add_queue_options(
    parser: argparse.ArgumentParser, *, required: bool = False, default: str = "from the config"
) -> None:
    """`--queue URL` (`required`, else `default` says where it comes from) and `--ca-file FILE`:
    how to reach the queue."""
    queue_help = "the queue's URL" if required else f"the queue's URL (default: {default})"
    parser.add_argument("--queue", metavar="URL", required=required, help=queue_help)
    parser.add_argument("--ca-file", type=Path, metavar="FILE", help=CA_FILE_HELP)


class UnreadableCaFile(ValueError):
    """A CA file named that cannot be read as one."""


def use_ca_file(path: Path | None) -> None:
    """`--ca-file`: every queue client this process opens trusts the CA in `path`."""
    if path is not None:
        os.environ["REVIEWER_CA_FILE"] = str(path)


def trusted_certificates() -> ssl.SSLContext | bool:
    """What verifies the queue's certificate: the CA file one of `CA_VARIABLES` names, else the
    system's store (httpx's default, True)."""
    for variable in CA_VARIABLES:
        path = os.environ.get(variable)
        if path:
            try:
                return ssl.create_default_context(cafile=path)
            except (OSError, ssl.SSLError) as error:
                raise UnreadableCaFile(f"{variable}={path} is not a readable CA file: {error}") from None
    return True
