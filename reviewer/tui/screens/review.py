"""ReviewScreen: one revision's plan rows, the selected row's detail, side-effect ratios and extremes."""

from __future__ import annotations

import os
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Static

from reviewer.plan.hosts import read_host
from reviewer.plan.proposal import Proposal, is_destructive
from reviewer.plan.sanitize import clip, safe_text
from reviewer.reading.analysis import Analysis
from reviewer.tui.failures import ReportsWorkerFailures
from reviewer.tui.model.sources import QueueItem, local_refusal, shown
from reviewer.tui.palette import role_text
from reviewer.tui.screens.dialogs import (
    BreakGlassScreen,
    ConfirmScreen,
    ReasonScreen,
    RejectScreen,
    RequestChangesScreen,
    TypedConfirmScreen,
)
from reviewer.tui.screens.drift import DriftScreen
from reviewer.tui.screens.queue import STATE_STYLES
from reviewer.tui.screens.styled_once import StyledOnce
from reviewer.tui.screens.verification import VerificationScreen
from reviewer.tui.widgets.chrome import Chrome, KeysFooter, Part, id_part
from reviewer.tui.widgets.panes import (
    detail_text,
    extremes_text,
    kept_writes,
    proof_word,
    ratios_text,
    summary_counts,
)
from reviewer.tui.widgets.plan_view import PlanView, is_alarm_row


def target_text(proposal: Proposal) -> Text:
    """Where the plan will run: the environment the agent names first (a long base URL would push it
    off a narrow screen), then the base URL (the one target field the executor enforces; without one,
    the runner chose to allow any target, or its tools are not HTTP calls), its host as it will be
    resolved when that differs from how it is written, and the API."""
    target = proposal.target
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(safe_text(clip(target.environment or "no environment", 40)), "warn.strong")
    text.append(" · ")
    reading = read_host(target.base_url) if target.base_url else None
    if reading is not None and not reading.plain:
        text.append(safe_text(clip(reading.resolved_url, 200)), "bold")
        if reading.written_host is not None:
            text.append(f" (written {safe_text(clip(reading.written_host, 80))})", "danger")
    else:
        text.append(
            safe_text(clip(target.base_url or "no base URL: where it runs is up to the runner", 200)), "bold"
        )
    text.append(f" · {safe_text(clip(target.api, 40))}")
    return text


def claim_text(proposal: Proposal) -> Text:
    """What the agent says it is doing (title, task) and where: to compare the claim with the plan."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(safe_text(clip(proposal.title, 300)), "bold")
    if proposal.task:
        text.append("  task: ", "muted")
        text.append(safe_text(clip(proposal.task, 600)))
    text.append("\n")
    text.append("runs on ", "muted")
    text.append_text(target_text(proposal))
    return text


def missing_agent() -> str | None:
    """Why no ssh-agent can be reached (`SSH_AUTH_SOCK` unset, or naming no socket), or None."""
    socket = os.environ.get("SSH_AUTH_SOCK", "")
    if not socket:
        return "no agent runs here (SSH_AUTH_SOCK is not set)"
    if not Path(socket).exists():
        return "SSH_AUTH_SOCK names no socket (the agent has stopped)"
    return None


def host_alarms(proposal: Proposal) -> list[str]:
    """One line, sanitized, per alarm about the base URL's host: look-alike letters, userinfo, an
    address where a name was expected (`reviewer.plan.hosts`)."""
    base_url = proposal.target.base_url
    alarms = read_host(base_url).alarms if base_url else ()
    return [f"! base URL: {safe_text(clip(alarm, 300))}" for alarm in alarms]


def alarm_candidates(analysis: Analysis) -> list[int]:
    """Indexes of the calls that may be alarm rows, from what a call says of itself: deletes and calls
    marked destructive, refused or failed answers (chain noise is told apart from their rows), values
    far outside the rest."""
    outliers = analysis.extremes.outlier_seqs
    found = []
    for index, call in enumerate(analysis.proposal.calls):
        answered = call.outcome.status if call.outcome is not None else None
        if (
            is_destructive(call.effect, call.destructive)
            or answered in ("refused", "error")
            or call.seq in outliers
        ):
            found.append(index)
    return found


PLAN_ROWS_KEPT = 3
"""Plan rows every screen size keeps, whatever the alarms: they fold to one line first."""

NARROW_PANES = 70
"""Under this many columns the panes under the plan take turns (`p`), each the full width."""

KEPT_WORD = "again"
"""What the reviewer types to approve a plan whose dry run kept writes: what approving does."""


def replan_notice(revision: int) -> str:
    return f"the agent re-planned: revision {revision} is waiting"


class ReviewScreen(StyledOnce, ReportsWorkerFailures, Screen[None]):
    """Everything needed to decide one revision, with the decision keys in the footer."""

    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (22, "-short"), (30, "-tall")]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_PANES, "-wide")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("a", "approve", "Approve"),
        Binding("x", "reject", "Reject"),
        Binding("c", "request_changes", "Request changes"),
        Binding("g", "break_glass", "Approve with break glass", show=False),
        Binding("d", "drift", "Drift"),
        Binding("v", "verify", "Verify"),
        Binding("f", "first_delete", "First delete"),
        Binding("n", "next_alarm", "Next alarm row"),
        Binding("e", "expand_alarms", "All alarms"),
        Binding("p", "next_pane", "Side panes"),
    ]
    PANES = ("detail-pane", "ratios-pane", "extremes-pane")
    """The panes under the plan; a narrow terminal shows one at a time, `p` the next."""

    @dataclass
    class DecisionRequested(Message):
        """The reviewer confirmed a decision; the app sends it (or, in the demo, says it did not)."""

        item: QueueItem
        revision: int
        decision: str
        reason: str
        digest: str
        """The digest the confirmation showed: the one the decision names."""

    def __init__(
        self,
        item: QueueItem,
        revision: int | None = None,
        mode: str = "demo",
        *,
        who: str | None = None,
        notice: str | None = None,
    ) -> None:
        """Live (`mode` "live"), `who` is the signed-in reviewer the chrome names first, and `notice`
        a banner to show once (why this revision was opened in place of another)."""
        super().__init__()
        # The height's class before the first styling: Textual's resize sets it too, and adding it
        # after mount restyled the whole screen a second time.
        width, height = self.app.size
        self.add_class(
            *[name for least, name in self.VERTICAL_BREAKPOINTS if height >= least][-1:],
            *[name for least, name in self.HORIZONTAL_BREAKPOINTS if width >= least][-1:],
            update=False,
        )
        self.live = mode == "live"
        self.who = who or mode
        self.notice = notice
        self.item = item
        self.revision = item.latest_revision if revision is None else revision
        self.analysis = item.analysis(self.revision)
        self.mode = mode
        self.drift_announced = False
        self._alarm_candidates: list[int] | None = None
        self.alarms = Text()
        """Every alarm line, as the banner shows it when there is room or `e` unfolds it."""
        self.alarms_unfolded = False

    def compose(self) -> ComposeResult:
        yield Chrome(id="chrome")
        yield Static(claim_text(self.analysis.proposal), id="claim")
        yield Static(id="alarms")
        plan = PlanView(self.analysis, kept=kept_writes(self.analysis.proposal), id="plan")
        plan.border_title = f"Plan · {len(self.analysis):,} calls"
        yield plan
        with Horizontal(id="panes"):
            with VerticalScroll(id="detail-pane") as detail:
                detail.border_title = "Selected call"
                yield Static(id="detail")
            with VerticalScroll(id="ratios-pane") as ratios:
                ratios.border_title = "Side effects"
                yield Static(id="ratios")
            with VerticalScroll(id="extremes-pane") as extremes:
                extremes.border_title = "Extremes"
                yield Static(id="extremes")
        yield Static(id="decision")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.announce_drift()
        self.item.seen_revision = max(self.item.seen_revision or 0, self.revision)
        self.query_one("#alarms", Static).display = False
        self.query_one("#decision", Static).display = False
        self.query_one(PlanView).focus()
        self.show_progress()
        self.call_after_refresh(self.fit_alarms)  # once the panes have their height
        if self.live:
            self.call_after_refresh(self.refresh_live)

    def show_progress(self) -> None:
        """Show what the loader has finished for this revision and say what it is still computing;
        the app calls this again each time it finishes a step (rows are readable from the start).
        Live, the queue's record follows in the chrome (`refresh_live`)."""
        self._show_progress()
        if self.live:
            self.refresh_live()

    def _show_progress(self) -> None:
        proposal = self.analysis.proposal
        self.query_one(Chrome).show(
            self.mode, *self.chrome_parts(), self.digest_part(), f"by {proposal.agent.name}"
        )
        problem = self.item.problems.get(self.revision)
        figures = self.item.figures(self.revision)
        if problem is not None:
            self.show_alarms(Text(f"BROKEN: {safe_text(clip(problem, 300))}; it cannot be approved", "bold"))
        else:
            latest = self.revision == self.item.latest_revision
            policy = self.item.policy_words() if latest else []
            refusals = self.item.refusal_words() if latest else []
            withdrawn = self.item.withdrawal_words() if latest else []
            alarms = [*refusals, *withdrawn, *policy, *(figures.alarms if figures is not None else ())]
            self.show_alarms(Text(" · ".join(alarms), "bold"))
        if figures is not None:
            proof = proof_word(figures.proposal.dry_run)
            self.query_one("#ratios", Static).update(ratios_text(figures.ratios, proof, figures.totals))
            self.query_one("#extremes", Static).update(extremes_text(figures.extremes))
            return
        pending = self.item.still_computing(self.revision)
        waiting = role_text("still computing: " + ", ".join(pending) if pending else "not computed", "muted")
        self.query_one("#ratios", Static).update(waiting)
        self.query_one("#extremes", Static).update(waiting)

    def refresh_live(self) -> None:
        """The chrome from the queue's record; alarms the fetched plan raised against that record."""
        if not self.query(Chrome):
            return  # pushed but not composed yet, or already being dismissed: on_mount refreshes it
        item = self.item
        parts = self.chrome_parts()
        words, label = item.revision_state_words(self.revision)
        parts.append((words, STATE_STYLES.get(label, "")))
        parts.append(self.digest_part())
        parts.append(("by you", "bold reverse") if item.mine else f"by {item.proposed_by}")
        if self.revision == item.latest_revision and (
            item.policy_words() or item.refusals or item.withdrawal_words()
        ):
            self._show_progress()
        self._show_digest_alarm()
        self.query_one(Chrome).show(self.who, *parts)
        if self.notice:
            self.show_decision(self.notice, error=True)
            self.notice = None
        elif self.revision < item.latest_revision:
            self.show_decision(
                f"{replan_notice(item.latest_revision)} (escape, then enter opens it)", error=True
            )

    def _show_digest_alarm(self) -> None:
        local = self.item.local_digests.get(self.revision)
        if local is None:
            return
        text = Text(
            f"DIGEST MISMATCH: the queue says {self.item.digests.get(self.revision, '')[:12]}…, "
            f"the plan fetched hashes to {local[:12]}…: do not approve",
            "bold",
        )
        figures = self.item.figures(self.revision)
        if figures is not None and figures.alarms:
            text.append(" · " + " · ".join(figures.alarms))
        self.show_alarms(text)

    def show_alarms(self, alarms: Text) -> None:
        """The alarm banner, in full when the plan keeps `PLAN_ROWS_KEPT` rows under it, else folded
        to one line that says how to unfold it (`e`)."""
        self.alarms = alarms
        self.fit_alarms()

    def on_resize(self) -> None:
        self.fit_alarms()

    def fit_alarms(self) -> None:
        if not self.is_attached or not self.query("#alarms"):
            return  # called after a refresh, and the screen was replaced meanwhile (a re-plan)
        banner = self.query_one("#alarms", Static)
        banner.display = bool(self.alarms.plain)
        if not self.alarms.plain:
            return
        width = max(self.size.width - 2, 10)
        needed = len(self.alarms.wrap(self.app.console, width))
        if self.alarms_unfolded or needed <= self.alarm_lines_free():
            banner.update(self.alarms)
            return
        hint = Text(" (e: all)", "bold")
        folded = self.alarms.copy()
        folded.truncate(width - hint.cell_len, overflow="ellipsis")
        folded.no_wrap = True
        banner.update(folded + hint)

    def alarm_lines_free(self) -> int:
        """Lines the alarm banner may take while the plan keeps `PLAN_ROWS_KEPT` rows: the screen
        less the chrome, the claim, the panes, the decision line, the footer and the plan's own."""
        taken = sum(
            widget.outer_size.height
            for widget in self.query("#chrome, #claim, #panes, #decision, KeysFooter")
            if widget.display
        )
        return self.size.height - taken - PLAN_ROWS_KEPT - 3  # the plan's border and header

    def action_expand_alarms(self) -> None:
        self.alarms_unfolded = not self.alarms_unfolded
        self.fit_alarms()

    def action_next_pane(self) -> None:
        """On a narrow terminal, the next pane under the plan in the place of the one shown."""
        panes = self.query_one("#panes")
        shown = next((name for name in self.PANES if panes.has_class(f"-show-{name}")), self.PANES[0])
        following = self.PANES[(self.PANES.index(shown) + 1) % len(self.PANES)]
        panes.remove_class(*(f"-show-{name}" for name in self.PANES))
        panes.add_class(f"-show-{following}")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`p` only where the panes take turns; `e` only while there are alarms."""
        if action == "next_pane":
            return self.has_class("-narrow")
        if action == "expand_alarms":
            return bool(self.alarms.plain)
        return True

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast about this proposal, shown only while its screen is the one on top: one raised
        later (a drift computed after the reviewer moved on) would be drawn over another proposal."""
        if self.is_current:
            self.app.notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def on_screen_suspend(self) -> None:
        """Its toasts go with the screen: another proposal's review, the queue or a dialog takes its place."""
        self.app.clear_notifications()

    def announce_drift(self) -> None:
        """Say once that the latest revision drifted: on opening if the drift is known by then, else
        when the worker comparing the revisions finishes (the app calls this again)."""
        drifted = self.item.latest_drift()
        if self.drift_announced or drifted is None or self.revision != self.item.latest_revision:
            return
        base, drift = drifted
        self.drift_announced = True
        self.notify(
            f"rev {self.revision} against rev {base}: {drift.summary}. Press d to see it.", title="Re-planned"
        )

    def chrome_parts(self) -> list[Part]:
        """What an approval names, first, since a narrow terminal cuts the chrome from the right; live,
        the state follows, then the digest (`digest_part`)."""
        return [id_part(self.item.proposal_id), f"rev {self.revision}/{self.item.latest_revision}"]

    def digest_part(self) -> Part:
        """The digest's first 12 hex digits, 7 on a narrow terminal (the confirmation shows all 64)."""
        digest = self.item.digests.get(self.revision, "")
        if not digest:
            return ("sha256 computing…", "", "sha256 …")
        return (f"sha256 {digest[:12]}…", "", f"{digest[:7]}…")

    @on(PlanView.RowHighlighted)
    def show_detail(self, message: PlanView.RowHighlighted) -> None:
        if not len(self.analysis):
            return
        row = self.analysis.row(message.index)
        call = self.analysis.proposal.calls[message.index]
        proposal = self.analysis.proposal
        text = detail_text(row, call, kept_writes(proposal), proposal.dry_run)
        if self.analysis.has_outlier(message.index):
            text.append("a value far outside the rest: the Extremes pane says how far\n", "danger")
        self.query_one("#detail", Static).update(text)
        self.query_one("#detail-pane", VerticalScroll).scroll_home(animate=False)

    def _decision_body(self, verb: str, blocker: str | None = None) -> Text:
        proposal = self.analysis.proposal
        digest = self.item.digests.get(self.revision) or "not computed yet"
        text = Text()
        text.append(f"{verb} revision {self.revision} of ", "bold")
        text.append(safe_text(proposal.proposal_id), "bold")
        text.append("\nplan sha256\n", "muted")
        text.append(f"{digest}\n")
        text.append("runs on ", "bold")
        text.append_text(target_text(proposal))
        text.append("\n")
        for alarm in host_alarms(proposal):
            text.append(f"{alarm}\n", "danger")
        figures = self.item.figures(self.revision)
        if figures is None:
            text.append(f"{len(proposal.calls):,} calls (the counts are still being computed)\n")
        else:
            text.append(summary_counts(figures) + "\n")
            for alarm in figures.alarms:
                text.append(f"! {alarm}\n", "danger")
        if verb == "Approve":
            self._append_quorum(text)
            self._append_signing(text)
            kept = self._kept_words()
            if kept:
                text.append(f"{kept}\n", "danger")
        if blocker:
            text.append(
                f"\nCANNOT BE APPROVED YET: {blocker}. Nothing is sent; press a again later.\n", "danger"
            )
        if self.mode == "demo":
            text.append("\ndemo: nothing will be sent", "italic")
        return text

    def _append_quorum(self, text: Text) -> None:
        """How many approvals the queue's policy asks for, how many it has, from whom."""
        from reviewer.policy.quorum import describe_approvals

        text.append("approvals  ", "bold")
        if not self.live:
            text.append("the demo has no queue: none are counted\n")
            return
        item = self.item
        so_far = describe_approvals(map(shown, item.approvals), item.approvals_required)
        text.append(f"{so_far} so far; yours makes {len(item.approvals) + 1}\n")
        text.append(
            "  the queue's count: an executor that checks signatures counts those its own "
            "allowed-signers file accepts, and may need more\n",
            "muted",
        )

    def _append_signing(self, text: Text) -> None:
        """Whether the decision will be signed, and with which key (`signing_key` in the config)."""
        signer = getattr(self.app, "decider", None)
        signer = getattr(signer, "signer", None)
        text.append("signature  ", "bold")
        if not self.live:
            text.append("the demo signs nothing\n")
            return
        if signer is None:
            text.append(
                "not signed: no signing key is configured (signing_key in config.toml, or "
                "REVIEWER_SIGNING_KEY); a policy that requires signatures will refuse it\n",
                "warn",
            )
            return
        from reviewer.signing.sshsig import AgentSigner

        key = signer.public_key
        if isinstance(signer, AgentSigner) and (missing := missing_agent()):
            text.append(
                f"cannot be signed: the key {key.key_type} {key.fingerprint} is to sign through ssh-agent, "
                f"but {missing}; y sends nothing. Start one and ssh-add the key, or connect with ssh -A\n",
                "danger",
            )
            return
        through = "through ssh-agent" if isinstance(signer, AgentSigner) else "from its key file"
        text.append(f"signed with {key.key_type} {key.fingerprint}, {through}\n")

    def _kept_words(self) -> str | None:
        """What approving a plan whose dry run kept its writes does: it makes them again."""
        kept = kept_writes(self.analysis.proposal)
        if kept is None:
            return None
        dry_run = self.analysis.proposal.dry_run
        sent = f" of {dry_run.write_requests:,}" if dry_run.write_requests is not None else ""
        return (
            f"THE DRY RUN ALREADY MADE {dry_run.writes_kept:,}{sent} WRITES: approving sends every "
            f"write of this plan a second time. Type {KEPT_WORD} to approve."
        )

    def action_approve(self) -> None:
        """The confirmation names the digest it shows; while the checks or the digest are unfinished
        it says so, and its `y` sends nothing (the digest it would name is not known). An approval
        the app refuses on its own (your own proposal, a digest mismatch) gets no confirmation."""
        self._approve("approve")

    def action_break_glass(self) -> None:
        """Approve so the plan may run outside its change windows: the dialog shows what an approval's
        shows and asks why it cannot wait. Also given on an approval no run claimed yet."""
        self._approve("break_glass")

    def _approve(self, decision: str) -> None:
        refused = local_refusal(self.item, self.revision, decision)
        if refused:
            self.show_decision(refused, error=True)
            title = "Glass not broken" if decision == "break_glass" else "Not approved"
            self.notify(refused, title=title, severity="warning")
            return
        blocker = self.item.approval_blocker(self.revision)
        shown_digest = None if blocker else self.item.digests.get(self.revision)

        def confirmed(answer: bool | str | None) -> None:
            if not answer:
                return
            if shown_digest is None:
                self.show_decision(f"not approved: {blocker}", error=True)
                return
            reason = answer if isinstance(answer, str) else ""
            self.post_message(
                self.DecisionRequested(self.item, self.revision, decision, reason, shown_digest)
            )

        self.app.clear_notifications()  # at 80x24 a notification would cover the dialog's keys
        body = self._decision_body("Approve", blocker)
        writes_again = kept_writes(self.analysis.proposal) and not blocker
        if decision == "break_glass":
            glass = BreakGlassScreen(body)
            if writes_again:  # breaking glass asks the word an approval of kept writes asks, then why

                def typed(answer: bool | None) -> None:
                    if answer:
                        self.app.push_screen(glass, confirmed)

                self.app.push_screen(TypedConfirmScreen("Approve: writes again", body, KEPT_WORD), typed)
            else:
                self.app.push_screen(glass, confirmed)
        elif writes_again:
            self.app.push_screen(TypedConfirmScreen("Approve: writes again", body, KEPT_WORD), confirmed)
        else:
            self.app.push_screen(ConfirmScreen("Approve", body), confirmed)

    def action_reject(self) -> None:
        self._decide_with_reason("reject", RejectScreen, "Not rejected")

    def action_request_changes(self) -> None:
        """Close this revision and ask the agent for the next: the reason is what to change."""
        self._decide_with_reason("request_changes", RequestChangesScreen, "Changes not requested")

    def _decide_with_reason(self, decision: str, dialog: type[ReasonScreen], refused_title: str) -> None:
        """A decision that approves nothing: asked for its reason, sent through the same path."""
        refused = local_refusal(self.item, self.revision, decision)
        if refused:
            self.show_decision(refused, error=True)
            self.notify(refused, title=refused_title, severity="warning")
            return

        def confirmed(reason: str | None) -> None:
            if reason:
                digest = self.item.digests.get(self.revision, "")
                self.post_message(self.DecisionRequested(self.item, self.revision, decision, reason, digest))

        self.app.clear_notifications()
        self.app.push_screen(dialog(self._decision_body(dialog.WORDS.title)), confirmed)

    def show_decision(self, message: str, *, error: bool = False) -> None:
        """The queue's answer (or the demo's "not sent"), in words, under the panes."""
        banner = self.query_one("#decision", Static)
        banner.display = True
        banner.set_class(error, "error")
        banner.update(Text(safe_text(clip(message, 500)), "bold"))
        self.call_after_refresh(self.fit_alarms)  # the banner takes lines the alarms had

    def show_failure(self, words: str) -> None:
        """A failed worker of this screen (the side panes' figures), in the decision banner's place."""
        self.show_decision(words, error=True)

    def action_drift(self) -> None:
        """This revision against the one before it (or the one last seen); the first revision of a
        re-planned proposal against the latest, since that is what approving the latest would change."""
        base, target = self.item.drift_base(self.revision), self.revision
        if base is None:
            newer = [number for number in self.item.revisions if number > self.revision]
            if not newer:
                self.notify("Only one revision: there is nothing to compare.", title="Drift")
                return
            base, target = self.revision, max(newer)
        self.item.drifts_viewed.add((base, target))
        self.app.push_screen(DriftScreen(self.item, base, target, self.mode))

    def action_first_delete(self) -> None:
        figures = self.item.figures(self.revision)
        if figures is None:
            self.notify("The analysis is still being computed: press f again in a moment.", title="Deletes")
            return
        first = figures.extremes.first_destructive
        if first is None:
            self.notify("This plan deletes nothing.", title="Deletes")
            return
        self.query_one(PlanView).move_cursor(first.index)

    def action_next_alarm(self) -> None:
        """The next row flagged red after the cursor (a delete or a call marked destructive, a refusal,
        an error, a value far outside the rest), wrapping round; a large plan is searched in a worker."""
        if self.item.figures(self.revision) is None:
            self.notify("The analysis is still being computed: press n again in a moment.", title="Alarms")
            return
        if self._alarm_candidates is None:
            self.find_alarm_candidates()
            return
        self._jump_to_next_alarm()

    @work(thread=True, group="alarm-rows", exclusive=True, exit_on_error=False)
    def find_alarm_candidates(self) -> None:
        """Iterating the calls decodes each once and keeps nothing, so no cache a paint reads is touched;
        the handler checks the few candidates' rows on the event loop."""
        self.post_message(self.AlarmCandidates(alarm_candidates(self.analysis)))

    @dataclass
    class AlarmCandidates(Message):
        indexes: list[int]

    def on_review_screen_alarm_candidates(self, message: AlarmCandidates) -> None:
        self._alarm_candidates = message.indexes
        self._jump_to_next_alarm()

    def _jump_to_next_alarm(self) -> None:
        plan = self.query_one(PlanView)
        candidates = self._alarm_candidates or []
        start = bisect_right(candidates, plan.cursor)
        for index in candidates[start:] + candidates[:start]:
            if index != plan.cursor and is_alarm_row(
                self.analysis.row(index), self.analysis.has_outlier(index)
            ):
                plan.move_cursor(index)
                return
        self.notify("No other row is flagged red.", title="Alarms")

    def action_verify(self) -> None:
        record = self.item.executions.get(self.revision)
        if record is None and self.item.execution_expected(self.revision):
            self.notify(
                "The report of the real run is being fetched: press v again in a moment.", title="Verify"
            )
            return
        if record is None:
            self.notify(
                f"Revision {self.revision} has not been executed: there is nothing to verify.", title="Verify"
            )
            return
        digest = self.item.digests.get(self.revision)
        if digest is None or self.revision not in self.item.verified:
            self.notify(
                "The plan's digest is still being computed: press v again in a moment.", title="Verify"
            )
            return
        self.app.push_screen(VerificationScreen(self.analysis.proposal, digest, record, self.mode))
