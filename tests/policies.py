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


def window(
    environment: str,
    name: str,
    kind: str,
    schedule: str,
    duration: str,
    time_zone: str,
    *,
    break_glass: int | None = None,
) -> str:
    """One change window of `environment`: an "allow" window is the only time its plans run, a
    "deny" window a time they do not, unless `break_glass` approvals (the default when None) break
    the glass; it opens on the cron `schedule` in `time_zone` and stays open for `duration`."""
    text = (
        f'[[environments.{environment}.windows]]\nname = "{name}"\nkind = "{kind}"\n'
        f'schedule = "{schedule}"\nduration = "{duration}"\ntime_zone = "{time_zone}"\n'
    )
    return text + (f"break_glass_approvals = {break_glass}\n" if break_glass else "")


WORKING_HOURS_AND_YEAR_END_FREEZE = "\n".join(
    (
        f"{ONE_APPROVAL}\n[environments.production]\napprovals = 1\n",
        window("production", "working hours", "allow", "0 9 * * 1-5", "8h", "Europe/Berlin"),
        window(
            "production", "year-end freeze", "deny", "0 0 24 12 *", "216h", "Europe/Berlin", break_glass=2
        ),
    )
)
"""Production runs in Berlin's working hours (Monday to Friday, 9 to 5) and not in the nine days
from Christmas Eve, unless two approvals break the glass: the windows a queue's clock is tried on."""
