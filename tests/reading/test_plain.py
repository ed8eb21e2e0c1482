"""A plan as plain lines: every call, what tells it apart, flags, hostile text made inert."""

from __future__ import annotations

import json
from pathlib import Path

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.analysis import Analysis
from reviewer.reading.plain import call_lines, common_args, common_lines, extremes_lines
from tests.builders import proposal_document

SAMPLES = Path(__file__).resolve().parents[2] / "reviewer" / "sample_proposals"


def test_the_six_scale_calls_read_apart() -> None:
    """The Kubernetes sample: `namespace=shop` said once for every scale call; each line keeps its
    name and replicas, its method and whole path; the deletes carry `del`, the outlier `out`."""
    analysis = Analysis(parse_proposal((SAMPLES / "k8s-shop-scale-down.server.json").read_bytes(), "k"))
    common = common_args(analysis)
    assert common == {"scale_deployment": {"namespace": "shop"}}
    assert common_lines(common) == ["every scale_deployment: namespace=shop"]
    lines = [line.text() for line in call_lines(analysis, common)]
    assert lines[0] == (
        "#1 validated update PATCH /apis/apps/v1/namespaces/shop/deployments/checkout/scale "
        "(scale_deployment)  name=checkout, replicas=4"
    )
    assert lines[5].endswith("[out]  name=catalog, replicas=40")
    assert lines[8].startswith("#9 real refusal delete DELETE /api/v1/persistentvolumes/pv-nfs-archive-2024")
    assert "[del]" in lines[8]
    assert extremes_lines(analysis.extremes)[:2] == [
        "replicas: n=6, median 4, min 3 (#4), max 40 (#6)",
        "  ! #6: 40 = 10× the median",
    ]


def test_hostile_text_is_shown_not_obeyed() -> None:
    calls = [
        {"tool": "t\x1b[2J", "effect": "update", "args": {"note": "\u202eevil", "x": 1}},
        {"tool": "t\x1b[2J", "effect": "update", "args": {"note": "\u202eevil", "x": "y" * 10_000}},
    ]
    analysis = Analysis(parse_proposal(json.dumps(proposal_document(calls)).encode(), "h"))
    text = "\n".join([*common_lines(common_args(analysis)), *(line.text() for line in call_lines(analysis))])
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b" in text
    assert max(len(line) for line in text.splitlines()) < 700
