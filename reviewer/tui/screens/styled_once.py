"""StyledOnce: a full screen, styled as it mounts, is not styled a second time as it first shows."""

from __future__ import annotations

from textual import events


class StyledOnce:
    """Mixed into each full screen (a plain mixin, as `ReportsWorkerFailures` is). Textual restyles
    every widget of a screen each time the screen is resumed, the first time included, just after
    they were styled at mount: for the queue and review screens that is a fifth of the first frame.
    The first resume skips it; later ones are left to Textual (a return from a translucent screen
    restyles)."""

    _resumed_once = False

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        """Runs before Textual's own handler (handlers run from the subclass up), which reads the flag."""
        if not self._resumed_once:
            self._resumed_once = True
            event.refresh_styles = False
