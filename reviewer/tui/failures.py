"""The one failure path of every worker: an error becomes words on the screen that ran it.

Every worker runs with `exit_on_error=False`, so an exception in one never takes the app down; the
node that ran it (a screen, or the app) receives `Worker.StateChanged` (which does not bubble) and
this mixin's handler says what failed, where the reviewer is looking, and as a notification.
"""

from __future__ import annotations

from typing import cast

from textual.dom import DOMNode
from textual.worker import Worker, WorkerState

from reviewer.plan.sanitize import clip, safe_text


def failure_words(worker: Worker[object]) -> str:
    error = worker.error
    what = worker.name or worker.group or "a background task"
    return safe_text(clip(f"{what} failed: {type(error).__name__}: {error}", 300))


class ReportsWorkerFailures:
    """Mixed into the app and each screen: `show_failure` says it on that screen. A plain mixin, not a
    DOMNode subclass: a second DOMNode base changes how Textual resolves the class's styles."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is not WorkerState.ERROR:
            return
        words = failure_words(event.worker)
        self.show_failure(words)
        cast(DOMNode, self).app.notify(words, title="Something failed", severity="error", timeout=30)

    def show_failure(self, words: str) -> None:
        """Overridden by each screen to put the words in its own status line."""
