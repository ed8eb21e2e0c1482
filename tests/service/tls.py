"""A throwaway certificate for 127.0.0.1, made by openssl, for a queue served over HTTPS in a test."""

from __future__ import annotations

import subprocess
from pathlib import Path


def self_signed(cert: Path, key: Path) -> None:
    """Write a one-day P-256 certificate for IP 127.0.0.1 to `cert`, its key to `key` (PEM)."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        + ["-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
