"""Sample policies the tests write into a `policy.toml` or parse, each named once: a test takes the
one it means, or composes its own file from these and the lines only it needs."""

from __future__ import annotations

import json

ONE_APPROVAL = "[default]\napprovals = 1\n"
"""Any plan needs one reviewer's approval: the smallest policy there is, and the head of a file to
which a test adds its own rules."""

TWO_APPROVALS = "[default]\napprovals = 2\n"
"""Every plan needs two reviewers: a quorum a first approval leaves pending, so that one can be
withdrawn, or counted "1 of 2"."""

DELETES_IN_PRODUCTION = """\
[[rules]]
name = "deletes in production"
when = 'environment == "production" && plan.counts.delete > 0'
approvals = 2
"""
"""A rule asking a second approval of a production plan that deletes: the rule an alarm names."""

DRY_RUN_IGNORED = "the API ignored the dry-run flag; fix the tool before asking a human"
"""Why the kept-writes rule rejects, unless a test gives its own reason."""


def kept_writes(reason: str = DRY_RUN_IGNORED) -> str:
    """A rule rejecting, before any human reads it, a plan whose dry run let writes through to the
    API (`writes_kept`): the policy decides it, with `reason`."""
    return f'[[rules]]\nname = "kept writes"\nwhen = "plan.dry_run.writes_kept > 0"\nreject = "{reason}"\n'


def signed_in_production(approvals: int, *reviewers: str) -> str:
    """One approval anywhere; in production `approvals` signed ones, from the named `reviewers` only
    when any are named: the policy that makes a reviewer sign."""
    named = f"reviewers = {json.dumps(list(reviewers))}\n" if reviewers else ""
    return f"{ONE_APPROVAL}\n[environments.production]\napprovals = {approvals}\nsignatures = true\n{named}"


def staging_approved_by_policy(base_url: str) -> str:
    """A staging environment owning the URLs under `base_url`, whose plans a rule may approve with no
    human (`allow_policy_approval`): where the policy's own approvals are tried."""
    return f'[environments.staging]\nbase_urls = ["{base_url}/*"]\nallow_policy_approval = true\n'
