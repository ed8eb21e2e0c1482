"""Sample policies the tests write into a `policy.toml` or parse, each named once: a test takes the
one it means, or composes its own file from these and the lines only it needs."""

from __future__ import annotations

ONE_APPROVAL = "[default]\napprovals = 1\n"
"""Any plan needs one reviewer's approval: the smallest policy there is, and the head of a file to
which a test adds its own rules."""

TWO_APPROVALS = "[default]\napprovals = 2\n"
"""Every plan needs two reviewers: a quorum a first approval leaves pending, so that one can be
withdrawn, or counted "1 of 2"."""
