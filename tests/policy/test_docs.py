"""The policy page's file is one `policy check` accepts, and `explain` prints the lines the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from reviewer.policy.file import parse_policy
from reviewer.service.notifications.targets import split_events
from tests.forked_commands import run_reviewer
from tests.system.documented import documented_block

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "policies.md"


def test_the_page_s_policy_checks_and_explains_as_shown(tmp_path: Path) -> None:
    text = PAGE.read_text()
    policy = tmp_path / "policy.toml"
    policy.write_text(re.search(r"```toml\n(# policy.toml\n.*?)```", text, re.S).group(1))  # type: ignore[union-attr]
    checked = subprocess.run(
        # rules timed on 2,000 calls, not the default 200,000 (tests/policy/test_cost.py times them)
        [sys.executable, "-m", "reviewer", "policy", "check", str(policy), "--calls", "2000"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    # The freeze the page's production keeps is listed, with when production's plans may run next.
    assert "window deny 'year-end freeze': 0 0 24 12 * for 9d, Europe/Berlin" in checked.stdout
    assert re.search(r"\[environments\.production\] plans may .*; next openings: \d{4}-", checked.stdout)
    samples = sorted(ROOT.glob("sample_proposals/*.server.json")) + sorted(
        ROOT.glob("sample_proposals/*.writes-kept.json")
    )
    explained = run_reviewer(
        [sys.executable, "-m", "reviewer", "policy", "explain", str(policy), *map(str, samples)],
        capture_output=True,
        text=True,
        check=True,
    )
    shown = re.search(r"```\n(k8s-shop-scale-down.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    assert shown in explained.stdout


def test_the_page_s_escalation_reads_as_three_steps_and_its_targets_each_choose_one() -> None:
    text = PAGE.read_text()
    ladder = re.search(r"```toml\n(\[\[environments\.production\.escalation\]\].*?)```", text, re.S)
    policy = parse_policy(ladder.group(1))  # type: ignore[union-attr]
    assert [step.after for step in policy.ladder_for("production")] == [600, 1800, 7200]
    (command,) = documented_block("policies.md", "reviewer serve --policy policy.toml --notify")
    chosen = [split_events(value)[0] for value in re.findall(r"--notify '([^']+)'", command.text)]
    assert chosen == [frozenset({f"proposal.escalated:{step}"}) for step in (1, 2, 3)]
