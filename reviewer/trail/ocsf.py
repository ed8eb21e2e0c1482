"""The trail's entries as OCSF API Activity events (class 6003, category 6, Application Activity),
for a SIEM that reads OCSF rather than the export format.

One event per entry: a submission is a Create (activity 1), every other event an Update (3) of the
proposal, named in `api.operation`; the actor is the token's name as the trail records it, a
service account (`type_id` 4) for an agent's events and a user (1) for a reviewer's; the proposal is
the resource (none for the end of a reviewer's sign-in); `metadata.uid` is the entry's leaf hash and
`metadata.sequence` its position, so an event can be traced back to the leaf an export proves. The
queue does not record the caller's address: `src_endpoint` names the queue's log (its checkpoint
origin), which is also `api.service.uid`, the one name a queue's replicas share. What the OCSF
classes have no field for (a signed decision, a report's digest, the trail's `seq`) is `unmapped`. An
attribute the leaf does not hold is left out, never written as null: loaders built on the OCSF
models refuse a null where they expect a value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

OCSF_VERSION: Final = "1.3.0"
API_ACTIVITY: Final = 6003
APPLICATION_ACTIVITY: Final = 6
CREATE, UPDATE = 1, 3
INFORMATIONAL: Final = 1
SUCCESS: Final = 1
SERVICE_NAME: Final = "reviewer queue"
AGENT_EVENTS: Final = frozenset({"submitted", "claimed", "executed"})
REVIEWER_EVENTS: Final = frozenset(
    {"approved", "rejected", "changes_requested", "sign_in_ended", "withdrawn"}
)
USER_TYPES: Final = {"Unknown": 0, "User": 1, "Service": 4}
"""OCSF's user `type_id`s the trail's actors are: a reviewer, a person; an agent's token, a service
account; anyone else (an event a later release adds) unknown."""


def api_activity(leaf: dict[str, Any], leaf_hash: str, origin: str) -> dict[str, Any]:
    """The OCSF event of one trail leaf (as decoded from its JSON)."""
    activity = CREATE if leaf.get("event") == "submitted" else UPDATE
    at = datetime.fromisoformat(str(leaf["at"]))
    return _without_nulls(
        {
            "class_uid": API_ACTIVITY,
            "class_name": "API Activity",
            "category_uid": APPLICATION_ACTIVITY,
            "category_name": "Application Activity",
            "activity_id": activity,
            "activity_name": "Create" if activity == CREATE else "Update",
            "type_uid": API_ACTIVITY * 100 + activity,
            "time": round(at.timestamp() * 1000),
            "severity_id": INFORMATIONAL,
            "severity": "Informational",
            "status_id": SUCCESS,
            "status": "Success",
            "message": _message(leaf),
            "actor": {"user": {"name": leaf.get("actor"), "uid": leaf.get("identity"), **_user_type(leaf)}},
            "api": {
                "operation": leaf.get("event"),
                "service": {"name": SERVICE_NAME, "uid": origin},
                "version": "v1",
            },
            "src_endpoint": {"svc_name": SERVICE_NAME, "uid": origin},
            "resources": [
                {
                    "type": "proposal",
                    "uid": leaf.get("proposal_id"),
                    "data": {"revision": leaf.get("revision"), "plan_sha256": leaf.get("plan_sha256")},
                }
            ]
            if leaf.get("proposal_id") is not None
            else [],
            "metadata": {
                "version": OCSF_VERSION,
                "product": {"name": "reviewer", "vendor_name": "reviewer"},
                "log_name": origin,
                "uid": leaf_hash,
                "sequence": leaf.get("index"),
            },
            "unmapped": {
                "reason": leaf.get("reason"),
                "signed": leaf.get("signed"),
                "report_sha256": leaf.get("report_sha256"),
                "trail_seq": leaf.get("seq"),
            },
        }
    )


def _user_type(leaf: dict[str, Any]) -> dict[str, Any]:
    event = leaf.get("event")
    kind = "Service" if event in AGENT_EVENTS else "User" if event in REVIEWER_EVENTS else "Unknown"
    return {"type_id": USER_TYPES[kind], "type": kind}


def _without_nulls(attributes: dict[str, Any]) -> dict[str, Any]:
    """`attributes` with every null left out, and every object left empty by that, at any depth."""
    kept = {name: _pruned(value) for name, value in attributes.items() if value is not None}
    return {name: value for name, value in kept.items() if value != {}}


def _pruned(value: Any) -> Any:
    if isinstance(value, dict):
        return _without_nulls(value)
    if isinstance(value, list):
        return [_pruned(item) for item in value if item is not None]
    return value


def _message(leaf: dict[str, Any]) -> str:
    """`alice approved proposal P revision 2`; a sign-in's end concerns no proposal."""
    said = f"{leaf.get('actor')} {leaf.get('event')}"
    if leaf.get("proposal_id") is None:
        return said
    return f"{said} proposal {leaf.get('proposal_id')} revision {leaf.get('revision')}"
