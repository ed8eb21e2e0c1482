"""Dialogs over a screen: the decision confirmation, the rejection reason, and the help."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

KEYS = (
    ("Queue", (("enter", "open the highlighted proposal"), ("up / down", "move"))),
    (
        "Review",
        (
            ("up / down, j / k", "move through the plan rows"),
            ("pageup / pagedown", "a page of rows"),
            ("home / end", "first / last row"),
            ("a", "approve this revision (asks to confirm)"),
            ("x", "reject this revision (asks for a reason)"),
            ("d", "drift against the previous revision"),
            ("v", "verification of an executed proposal"),
            ("escape", "back to the queue"),
        ),
    ),
    ("Everywhere", (("?", "this help"), ("q", "quit"))),
    (
        "Confirmation",
        (
            ("y", "yes, send it"),
            ("n / escape", "no, go back"),
            ("enter", "send the rejection with its reason"),
        ),
    ),
)


class ConfirmScreen(ModalScreen[bool]):
    """Asks y/n; the body is built by the caller from sanitized text."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = self.title_text
            yield Static(self.body, classes="dialog-body")
            yield Static(Text("y  yes, send it      n  no", style="bold"), classes="dialog-keys")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class RejectScreen(ModalScreen[str | None]):
    """Asks why: a rejection carries a reason the agent can act on."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, body: Text) -> None:
        super().__init__()
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Reject"
            yield Static(self.body, classes="dialog-body")
            yield Input(placeholder="reason (required), enter to send", max_length=2000)
            yield Static(
                Text("enter  send the rejection      escape  back", style="bold"), classes="dialog-keys"
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        reason = event.value.strip()
        if reason:
            self.dismiss(reason)
        else:
            self.notify("A rejection needs a reason.", severity="warning")

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key the app answers to; works the same in the demo and live."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        text = Text()
        for group, keys in KEYS:
            text.append(f"{group}\n", "bold underline")
            for key, meaning in keys:
                text.append(f"  {key:<20}", "bold")
                text.append(f"{meaning}\n")
            text.append("\n")
        text.append("Dry-run verdicts\n", "bold underline")
        for verdict, meaning in VERDICT_HELP:
            text.append(f"  {verdict:<16}", "bold")
            text.append(f"{meaning}\n")
        with VerticalScroll(classes="dialog help") as dialog:
            dialog.border_title = "Keys"
            yield Static(text)

    def action_close(self) -> None:
        self.dismiss(None)


VERDICT_HELP = (
    ("validated", "the API's own dry run accepted it"),
    ("real refusal", "the API refused it; the real run will be refused too"),
    ("chain noise", "refused only because an earlier create was not persisted"),
    ("not validated", "a fake answered: shape only"),
    ("recorded", "only written down"),
    ("flags", "del = deletes, ←#N = uses a value from call N,"),
    ("", "?#N = names no earlier call, hid = hidden characters"),
)
