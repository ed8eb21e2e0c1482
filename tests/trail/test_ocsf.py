"""A trail leaf as an OCSF API Activity event: the class's required attributes, and the leaf's hash
and position to trace it back to what an export proves."""

from __future__ import annotations

import json

from reviewer.trail.entries import leaf
from reviewer.trail.ocsf import api_activity

REQUIRED = {"activity_id", "category_uid", "class_uid", "type_uid", "time", "severity_id", "metadata"}
"""The attributes every OCSF event requires, with API Activity's own: actor, api, src_endpoint."""


def test_a_decision_is_an_api_activity_update_naming_who_what_and_the_leaf() -> None:
    content = json.loads(
        leaf(
            index=4,
            seq=9,
            at=1_780_000_000.5,
            actor="alice",
            event="approved",
            proposal_id="p-1",
            revision=2,
            plan_sha256="5be1" * 16,
            reason=None,
            statement="statement",
            signature="-----BEGIN SSH SIGNATURE-----",
            key_fingerprint="SHA256:abc",
            identity="oidc:https://id.example#alice-7",
        )
    )
    event = api_activity(content, "bGVhZg==", "reviewer.trail/0123")
    assert REQUIRED | {"actor", "api", "src_endpoint"} <= set(event)
    assert (event["class_uid"], event["category_uid"], event["activity_id"], event["type_uid"]) == (
        6003,
        6,
        3,
        600303,
    )
    assert event["time"] == 1_780_000_000_500
    assert event["actor"] == {"user": {"name": "alice", "uid": "oidc:https://id.example#alice-7"}}
    assert event["resources"][0] == {
        "type": "proposal",
        "uid": "p-1",
        "data": {"revision": 2, "plan_sha256": "5be1" * 16},
    }
    assert (event["metadata"]["uid"], event["metadata"]["sequence"]) == ("bGVhZg==", 4)
    assert event["unmapped"]["signed"]["key_fingerprint"] == "SHA256:abc"
    submitted = api_activity({**content, "event": "submitted"}, "x", "o")
    assert (submitted["activity_id"], submitted["type_uid"]) == (1, 600301)
