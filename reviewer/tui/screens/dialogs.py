"""Dialogs over a screen: the decision confirmation, the reason of a rejection or of a request for
changes, and the help."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from reviewer.reading.danger import KINDS, UNTESTED_WORDS

Answer = TypeVar("Answer")
"""What a dialog's dismissal carries: a yes or no, or a reason."""

HelpSection = tuple[str, list[tuple[str, str]]]
"""A screen's name and its keys as (keys as shown, what they do), built from the bindings."""


KEY_WORDS = {"question_mark": "?", "slash": "/", "pageup": "pgup", "pagedown": "pgdn"}


def key_words(binding: Binding) -> str:
    """A key as the help names it: its name (`enter`, `escape`, `up`), which reads the same in every
    terminal font, rather than a glyph such as ⏎ that some fonts over SSH lack."""
    return KEY_WORDS.get(binding.key, binding.key)


def help_rows(
    bindings: list[BindingType], key_display: Callable[[Binding], str] = key_words
) -> list[tuple[str, str]]:
    """One line per action, its keys joined (`up / k`), in the order the bindings declare them."""
    rows: dict[tuple[str, str], list[str]] = {}
    for binding in Binding.make_bindings(bindings):
        if not binding.description:
            continue
        rows.setdefault((binding.action, binding.description), []).append(key_display(binding))
    return [(" / ".join(dict.fromkeys(keys)), description) for (_, description), keys in rows.items()]


class DecisionDialog(ModalScreen[Answer]):
    """A decision's dialog: the body the caller built from sanitized text scrolls, and what answers
    it (the keys, a field) stays at the bottom in sight, however small the terminal."""

    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("pageup", "scroll_body(-1)", "scroll the dialog up", show=False),
        Binding("pagedown", "scroll_body(1)", "scroll the dialog down", show=False),
    ]

    def __init__(self, title: str, body: Text, keys: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.keys = keys

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog decision") as dialog:
            dialog.border_title = self.title_text
            with VerticalScroll(classes="dialog-body"):
                yield Static(self.body)
            with Vertical(classes="dialog-foot"):
                yield from self.answer_fields()
                yield Static(Text(self.keys, style="bold"), classes="dialog-keys")

    def answer_fields(self) -> ComposeResult:
        """The fields the answer is typed into, above the keys (none: a key answers)."""
        yield from ()

    def action_scroll_body(self, pages: int) -> None:
        body = self.query_one(".dialog-body", VerticalScroll)
        body.scroll_relative(y=pages * max(body.size.height - 1, 1), animate=False)


class ConfirmScreen(DecisionDialog[bool]):
    """Asks y/n; up and down scroll the body."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes, send it"),
        Binding("n,escape", "answer(False)", "no, go back"),
    ]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__(title, body, "y  yes, send it      n  no")

    def on_mount(self) -> None:
        self.query_one(".dialog-body", VerticalScroll).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class TypedConfirmScreen(DecisionDialog[bool]):
    """Asks for a word to be typed instead of `y`: for a decision whose effect a tired reviewer must
    read first (approving writes a dry run already made sends them a second time)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "send it, once the word is typed", show=False),
        Binding("escape", "answer(False)", "no, go back"),
    ]

    def __init__(self, title: str, body: Text, word: str) -> None:
        super().__init__(title, body, f"{word} + enter  send it      escape  back")
        self.word = word

    def answer_fields(self) -> ComposeResult:
        yield Input(placeholder=f"type {self.word} and press enter", max_length=40)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip() == self.word:
            self.dismiss(True)
        else:
            self.notify(f"Type {self.word} to send it, or escape to go back.", severity="warning")

    async def action_submit(self) -> None:
        """Enter in the field submits it (the Input's own event); here for the help's sake."""
        await self.query_one(Input).action_submit()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


@dataclass(frozen=True)
class ReasonWords:
    """What a reason dialog says: its title, the keys at its foot, the empty field's hint, what an
    empty enter is told, and what enter does in the help."""

    title: str
    keys: str
    placeholder: str
    missing: str
    send: str


def reason_bindings(words: ReasonWords) -> list[BindingType]:
    return [
        Binding("enter", "submit", words.send, show=False),
        Binding("escape", "cancel", "no, go back"),
    ]


class ReasonScreen(DecisionDialog[str | None]):
    """Asks for the words a decision cannot go without; a subclass gives its `WORDS`."""

    WORDS: ClassVar[ReasonWords]

    def __init__(self, body: Text) -> None:
        super().__init__(self.WORDS.title, body, self.WORDS.keys)

    def answer_fields(self) -> ComposeResult:
        yield Input(placeholder=self.WORDS.placeholder, max_length=2000)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        reason = event.value.strip()
        if reason:
            self.dismiss(reason)
        else:
            self.notify(self.WORDS.missing, severity="warning")

    async def action_submit(self) -> None:
        """Enter in the reason field submits it (the Input's own event); here for the help's sake."""
        await self.query_one(Input).action_submit()

    def action_cancel(self) -> None:
        self.dismiss(None)


REJECT_WORDS: Final = ReasonWords(
    "Reject",
    "enter  send the rejection      escape  back",
    "reason (required), enter to send",
    "A rejection needs a reason.",
    "send the rejection with its reason",
)
CHANGES_WORDS: Final = ReasonWords(
    "Request changes",
    "enter  ask for these changes      escape  back",
    "what to change (required), enter to send",
    "Say what to change: the agent re-plans from it.",
    "ask for the changes the field says",
)


BREAK_GLASS_WORDS: Final = ReasonWords(
    "Approve with break glass",
    "enter  approve, breaking glass      escape  back",
    "why it cannot wait (required; the trail keeps it)",
    "Breaking glass needs a reason: the trail keeps it.",
    "approve, letting the plan run outside its change windows",
)


class BreakGlassScreen(ReasonScreen):
    """An approval that also lets the plan run outside its change windows, once as many reviewers as
    the window asks broke glass: it asks why, and the trail keeps the words."""

    BINDINGS: ClassVar[list[BindingType]] = reason_bindings(BREAK_GLASS_WORDS)
    WORDS = BREAK_GLASS_WORDS


class RejectScreen(ReasonScreen):
    """Asks why: a rejection carries a reason the agent can act on."""

    BINDINGS: ClassVar[list[BindingType]] = reason_bindings(REJECT_WORDS)
    WORDS = REJECT_WORDS


class RequestChangesScreen(ReasonScreen):
    """Asks what to change: the agent re-plans from these words, and its next revision is shown
    against this one."""

    BINDINGS: ClassVar[list[BindingType]] = reason_bindings(CHANGES_WORDS)
    WORDS = CHANGES_WORDS


class HelpScreen(ModalScreen[None]):
    """Every key the app answers to, built from the screens' own bindings (a key added to a screen
    shows up here by itself), and what the verdicts and flags mean; the same in the demo and live."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, sections: list[HelpSection]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        parts: list[RenderableType] = []
        for group, keys in self.sections:
            parts.append(Text(group, "bold underline"))
            parts.append(two_columns(keys, 22))
            parts.append(Text(""))
        parts.append(Text("Dry-run verdicts", "bold underline"))
        parts.append(two_columns(VERDICT_HELP, 16))
        parts.append(Text(""))
        parts.append(
            Text("Queue danger: the worst of a proposal, !!! stop, !! danger, ! caution", "bold underline")
        )
        parts.append(two_columns(danger_help(), 16))
        with VerticalScroll(classes="dialog help") as dialog:
            dialog.border_title = "Keys"
            yield Static(Group(*parts))

    def action_close(self) -> None:
        self.dismiss(None)


def two_columns(rows: Sequence[tuple[str, str]], first: int) -> Table:
    """Name and meaning side by side; a long meaning wraps under itself, not under the name."""
    table = Table.grid(padding=(0, 1))
    table.add_column(width=first, style="bold", no_wrap=True)
    table.add_column(ratio=1)
    for name, meaning in rows:
        table.add_row(f"  {name}", meaning)
    return table


VERDICT_HELP = (
    (
        "validated",
        "the API's own dry run accepted it, and its audit log or a sandbox check proved it kept nothing",
    ),
    (
        "ok, unproven",
        "the API accepted it, but nothing proved it honoured the dry-run parameter: it may have written",
    ),
    ("real refusal", "the API refused it; the real run will be refused too"),
    (
        "chain noise",
        "refused only because an earlier call of the plan (a create it uses, or a write to the same "
        "resource) was not persisted; the real run may succeed",
    ),
    ("not validated", "a fake answered: shape only"),
    ("refused by fake", "a fake refused the request's shape"),
    ("recorded", "only written down"),
    ("error", "the dry run of this call itself failed"),
    ("no outcome", "the proposal carries no dry-run answer for this call"),
    ("kept: written", "the dry run kept this write (the API ignored the flag): it has already happened"),
    (
        "flags",
        "del = deletes, out = a value far outside the rest, hid = hidden characters, alike = look-alike "
        "letters or text not in NFC, ←#N = chained to call N, ?#N = names no earlier call, +N = N more flags",
    ),
    ("marks", "▶ cursor, + added, ~ changed, - removed, · dry-run answer changed"),
    ("queue marks", "▶ cursor, • new, Δ re-planned and the drift not yet viewed"),
)


def danger_help() -> list[tuple[str, str]]:
    """Each word of the queue's danger column, at the severity it starts at, and what raises it."""
    rows = []
    for kind, (severity, word, meaning) in KINDS.items():
        rows.append((f"{'!' * severity:<3} {word}", meaning))
        if kind == "not_validated":
            rows.extend((f"{'!' * severity:<3} {how}", said) for how, said in UNTESTED_WORDS.values())
    return rows
