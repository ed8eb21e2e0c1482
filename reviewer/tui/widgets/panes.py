"""The review screen's panes as Rich text: side-effect ratios, extremes, and the selected row's detail.

Every string that came from the proposal passes through the sanitizer here and is appended to a
`Text` as plain text, so markup in it stays literal; only our own labels carry styles.
"""

from __future__ import annotations

import msgspec
from rich.text import Text

from reviewer.plan.bodies import body_view
from reviewer.plan.proposal import Call, DryRun, Proposal, audit_read, dumps, sandbox_proof
from reviewer.plan.sanitize import clip, safe_text
from reviewer.reading.analysis import Analysis, Extremes, NumericField, PlanRow, Ratios, Verdict
from reviewer.reading.plain import number
from reviewer.reading.summary import counts_words, read_plan
from reviewer.reading.totals import Total, totals_words
from reviewer.tui.palette import role_text

DETAIL_LIMIT = 4_000
"""Characters of one value the detail pane shows; the rest is counted, not dropped silently."""

VERDICT_MEANING = {
    Verdict.VALIDATED: "the server's rules accepted this call against the state before the run",
    Verdict.UNPROVEN: "the server accepted this call, but nothing proved the API honoured the dry-run "
    "parameter (no log of kept writes read for the dry run, no sandbox check): it may have written for real",
    Verdict.REAL_REFUSAL: "the server refused it, and nothing in the plan explains it: the real run "
    "will be refused too",
    Verdict.CHAIN_NOISE: "refused only because an earlier call of this plan (one it takes a value "
    "from, or one that writes the same resource first) was not persisted by the dry run; the real run "
    "may succeed",
    Verdict.NOT_VALIDATED: "a fake answered: only the request's shape was checked, none of the "
    "server's rules",
    Verdict.FAKE_REFUSAL: "a fake refused the request's shape",
    Verdict.RECORDED: "only written down: nothing was validated",
    Verdict.ERROR: "the dry run itself failed for this call",
    Verdict.NO_OUTCOME: "the proposal carries no dry-run answer for this call",
}
VERDICT_STYLE = {
    Verdict.VALIDATED: "ok",
    Verdict.UNPROVEN: "warn.strong",  # may have been written for real: never the dimmest words
    Verdict.REAL_REFUSAL: "danger",
    Verdict.FAKE_REFUSAL: "danger",
    Verdict.ERROR: "danger",
    Verdict.CHAIN_NOISE: "warn",
    Verdict.NOT_VALIDATED: "warn",
    Verdict.RECORDED: "muted",
    Verdict.NO_OUTCOME: "muted",
}


KEPT_LABELS = {"all": "kept: written", "some": "maybe kept"}
"""The dry-run column of a write the dry run kept: every write it sent, or some (which ones, the
proposal does not say)."""
KEPT_MEANING = {
    "all": "the API ignored the dry-run flag and kept this write: it has already happened, and "
    "approving sends it again",
    "some": "the API kept some of the dry run's writes and the proposal does not say which: this one "
    "may already have happened, and approving sends it again",
}


def kept_writes(proposal: Proposal) -> str | None:
    """ "all" when the dry run kept every write it sent, "some" when it kept some, None when it kept
    none (or did not count them)."""
    dry_run = proposal.dry_run
    if not dry_run.writes_kept:
        return None
    if dry_run.write_requests is not None and dry_run.writes_kept < dry_run.write_requests:
        return "some"
    return "all"


def row_kept(row: PlanRow, kept: str | None) -> bool:
    """Whether `row` is one of the writes a dry run that kept writes may have kept: a write the
    server accepted."""
    return kept is not None and row.effect != "read" and row.verdict in (Verdict.VALIDATED, Verdict.UNPROVEN)


def untrusted(value: object, *, multiline: bool = False, limit: int = DETAIL_LIMIT) -> str:
    """Any proposal value as display-safe text: JSON for structures, clipped, sanitized."""
    if value is msgspec.UNSET:
        return "(absent)"
    if isinstance(value, str):
        text = value
    elif multiline:
        text = msgspec.json.format(dumps(value), indent=2).decode()
    else:
        text = dumps(value).decode()
    return safe_text(clip(text, limit), multiline=multiline)


LABEL_CELLS = 12
MONEY_LINES = 3
"""Currencies the panes name one by one; past these, how many more."""
ARGS_ON_ONE_LINE = 200
"""Arguments up to this long are shown as one line of JSON, right under the call's name."""


def _line(text: Text, label: str, value: str | Text, style: str = "") -> None:
    text.append(f"{label:<{LABEL_CELLS}}", "bold")
    text.append(value, style) if isinstance(value, str) else text.append_text(value)
    text.append("\n")


def proof_word(dry_run: DryRun) -> tuple[str, str] | None:
    """What a server dry run carries as proof that it kept nothing, in a word that fits the pane at
    80x24, and its style: the audit log (red when it found kept writes), a sandbox check, no write
    sent (so none kept), or none.
    None for other dry runs."""
    if dry_run.via != "server":
        return None
    if audit_read(dry_run):
        return "audit", "ok" if dry_run.writes_kept == 0 else "danger"
    if sandbox_proof(dry_run) is not None:
        return "sandbox", "ok"
    if dry_run.writes_kept == 0:
        return "no writes", "ok"
    return "none", "warn"


def proven_by(dry_run: DryRun) -> str | None:
    """What proved a validated call kept nothing, in full, for the detail pane."""
    if audit_read(dry_run):
        if dry_run.writes_kept != 0:
            return None
        return "the API's log of kept writes, read for the dry run's window, shows no write kept"
    proof = sandbox_proof(dry_run)
    if proof is not None:
        parameter = "&".join(f"{name}={value}" for name, value in proof.query.items())
        return (
            f"a sandbox check at {proof.checked_at}: a create sent to {proof.url} with {parameter} "
            "was not kept"
        )
    if dry_run.writes_kept == 0:
        return "the dry run sent no write to the API, so it kept none (no audit log was read)"
    return None


def ratios_text(ratios: Ratios, proof: tuple[str, str] | None = None, totals: tuple[Total, ...] = ()) -> Text:
    """Side-effect ratios, the money the plan moves (`totals`), and what the dry run did and did not
    prove, alarms first; `proof` is `proof_word` of a server dry run."""
    text = Text()
    if ratios.writes_kept:
        text.append(f"DRY RUN KEPT {ratios.writes_kept:,} WRITES\n", "danger.banner")
        text.append("the API ignored the dry-run flag\n", "danger")
    _line(text, "calls", f"{ratios.calls:,}")
    _line(
        text,
        "c:u:d:o",
        f"{ratios.creates:,}:{ratios.updates:,}:{ratios.deletes:,}:{ratios.reads + ratios.other:,}",
    )
    _line(
        text,
        "destructive",
        ratios.destructive_percent(),
        "danger" if ratios.destructive else "",
    )
    for total in totals[:MONEY_LINES]:
        _line(text, "moves", f"{total.currency} {total.moved()}", "warn.strong")
    if len(totals) > MONEY_LINES:
        _line(text, "moves", f"{len(totals) - MONEY_LINES} more currencies", "warn.strong")
    _line(text, "validated", f"{ratios.validated:,}", "ok" if ratios.validated else "")
    if proof is not None:
        _line(text, "proof", *proof)
    unvalidated = ratios.unproven + ratios.not_validated + ratios.recorded + ratios.no_outcome
    _line(text, "unvalidated", f"{unvalidated:,}", "warn" if unvalidated else "")
    _line(text, "refused", f"{ratios.real_refusals:,} real", "danger" if ratios.real_refusals else "")
    if ratios.fake_refusals:
        _line(text, "fake refused", f"{ratios.fake_refusals:,} (shape)", "danger")
    _line(text, "chain noise", f"{ratios.chain_noise:,}", "warn" if ratios.chain_noise else "")
    if ratios.errors:
        _line(text, "errors", f"{ratios.errors:,}", "danger")
    requests = "–" if ratios.write_requests is None else f"{ratios.write_requests:,}"
    kept = "–" if ratios.writes_kept is None else f"{ratios.writes_kept:,}"
    _line(text, "sent/kept", f"{requests} / {kept}", "danger" if ratios.writes_kept else "")
    _line(text, "resources", f"{ratios.resources:,} touched")
    _line(text, "placeholder", f"{ratios.depends_on_placeholders:,} calls use one")
    if ratios.unresolved_placeholders:
        _line(text, "unresolved", f"{ratios.unresolved_placeholders:,} name no call", "danger")
    return text


def _numeric_line(text: Text, field: NumericField) -> None:
    text.append(safe_text(clip(field.name, 40)), "bold")
    text.append(f"  n={field.count:,}  median {number(field.median)}\n")
    text.append(f"  min {number(field.minimum)} (#{_seqs(field.minimum_seqs)})")
    text.append(f"  max {number(field.maximum)} (#{_seqs(field.maximum_seqs)})\n")
    for outlier in field.outliers:
        text.append(
            f"  ! #{outlier.seq}: {number(outlier.value)} = {outlier.times_median:,.0f}× the median\n",
            "danger",
        )


def _seqs(seqs: tuple[int, ...]) -> str:
    return ",".join(map(str, seqs))


def extremes_text(extremes: Extremes) -> Text:
    """The fields with values far outside the rest first, then the first delete, the busiest
    resource, the largest payload, and every other numeric field's range."""
    text = Text()
    far = [field for field in extremes.numeric if field.outliers]
    for field in far:
        _numeric_line(text, field)
    if far:
        text.append("\n")
    first = extremes.first_destructive
    if first is not None:
        text.append("first delete ", "bold")
        text.append(f"#{first.seq} ", "danger")
        text.append(safe_text(clip(first.tool, 30)))
        if first.path:
            text.append(" " + safe_text(clip(first.path, 60)))
        text.append("\n")
    if extremes.most_touched is not None:
        resource, count = extremes.most_touched
        text.append("most touched ", "bold")
        text.append(f"{safe_text(clip(resource, 60))} ({count:,} calls)\n")
    if extremes.largest_payload is not None:
        seq, size = extremes.largest_payload
        text.append("largest      ", "bold")
        text.append(f"#{seq} ({size:,} bytes)\n")
    rest = [field for field in extremes.numeric if not field.outliers]
    if rest:
        text.append("\n")
    for field in rest:
        _numeric_line(text, field)
    return text or role_text("no numeric arguments, no deletes", "muted")


def detail_text(row: PlanRow, call: Call, kept: str | None = None, dry_run: DryRun | None = None) -> Text:
    """Everything about one call: its arguments first (at 80x24 the pane shows a few lines), its
    verdict explained (with what proved it, given the proposal's `dry_run`), flags spelled out, the
    full request and answer. `kept` is `kept_writes` of the proposal."""
    text = Text()
    text.append(f"#{row.seq} ", "bold")
    text.append(untrusted(row.tool, limit=200), "bold")
    text.append(f"  {row.effect}\n", "danger" if row.destructive else "")
    short_args = untrusted(call.args or {})
    multiline = len(short_args) > ARGS_ON_ONE_LINE
    _line(text, "args", untrusted(call.args or {}, multiline=True) if multiline else short_args)
    if row.method or row.path:
        _line(text, "call", untrusted(f"{row.method or ''} {row.path or ''}".strip(), limit=400))
    if row_kept(row, kept) and kept is not None:
        text.append(KEPT_LABELS[kept], "danger")
        text.append(f": {KEPT_MEANING[kept]}\n")
    else:
        text.append(str(row.verdict), VERDICT_STYLE[row.verdict])
        if row.http_status is not None:
            text.append(f" ({row.http_status})", VERDICT_STYLE[row.verdict])
        text.append(f": {VERDICT_MEANING[row.verdict]}\n")
        proof = proven_by(dry_run) if dry_run is not None and row.verdict is Verdict.VALIDATED else None
        if proof is not None:
            _line(text, "proven by", untrusted(proof, limit=600), "ok")
    if row.message:
        _line(text, "answer", untrusted(row.message, limit=1_000))
    if row.destructive:
        text.append("destructive: deletes what it touches\n", "danger")
    if row.written_before is not None:
        _line(
            text,
            "chained",
            f"#{row.written_before} writes {untrusted(row.resource, limit=200)} first",
            "warn",
        )
    if row.lookalike:
        text.append(
            "look-alike letters: a name mixes scripts or passes for Latin letters, or text is not NFC\n",
            "danger",
        )
    for placeholder in row.placeholders:
        style = "danger" if not placeholder.resolvable else "warn"
        _line(text, "depends on", untrusted(placeholder.provenance(), limit=300), style)
    if row.hidden_characters:
        text.append(
            "hidden characters: control, bidi or zero-width characters are shown as \\x.. / \\u.... "
            "escapes\n",
            "danger",
        )
    if call.request is not None:
        if call.request.query:
            _line(text, "query", untrusted(call.request.query))
        if call.request.body is not None:
            shown = body_view(call.request.content_type, call.request.body)
            _line(text, "body", untrusted(shown, multiline=True))
    if call.outcome is not None and call.outcome.result is not None:
        _line(text, "result", untrusted(call.outcome.result, multiline=True))
    return text


def summary_counts(analysis: Analysis) -> str:
    """What is being approved, for the confirmation and the queue's line: counts of each effect, the
    calls marked destructive that are not deletes (an update that destroys), the money it moves."""
    words = counts_words(read_plan(analysis.proposal, analysis))
    if analysis.totals:
        words += f", moving {totals_words(analysis.totals, limit=MONEY_LINES)}"
    return words
