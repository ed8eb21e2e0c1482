"""Test-wide settings: snapshots in colour, whatever the environment says."""

from __future__ import annotations

import os

os.environ.pop("NO_COLOR", None)
