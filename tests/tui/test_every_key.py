"""Every bound key on every screen, pressed: the app survives each, and the help lists each."""

from __future__ import annotations

import pytest
from textual.binding import Binding
from textual.screen import Screen

from reviewer.tui.app import ReviewerApp
from reviewer.tui.screens.dialogs import HelpScreen, key_words
from reviewer.tui.screens.drift import DriftScreen
from reviewer.tui.widgets.plan_view import PlanView
from tests.tui.helpers import wait_until_loaded

pytestmark = pytest.mark.anyio

FILES = (
    "deskline-triage.rev1.json",
    "deskline-triage.rev2.json",
    "deskline-merge.server.json",
    "deskline-merge.server.execution.json",
)
ROUTES = {
    "queue": (),
    "review": ("enter",),
    "drift": ("enter", "d"),
    "verification": ("end", "enter", "v"),
    "approve confirmation": ("down", "enter", "a"),
    "reject dialog": ("down", "enter", "x"),
    "help": ("question_mark",),
}


QUIT = frozenset({"quit", "app.quit"})


def bound_keys(screen: Screen[object]) -> list[str]:
    """The keys the screen answers to now: its own, its focused widget's and the app's, less quit."""
    return sorted(key for key, active in screen.active_bindings.items() if active.binding.action not in QUIT)


async def reach(pilot, route: tuple[str, ...]) -> Screen[object]:  # type: ignore[no-untyped-def]
    await wait_until_loaded(pilot)
    for key in route:
        await pilot.press(key)
        await wait_until_loaded(pilot)
    return pilot.app.screen


async def back_to_the_queue(pilot) -> None:  # type: ignore[no-untyped-def]
    while len(pilot.app.screen_stack) > 1:
        await pilot.press("escape")
        await wait_until_loaded(pilot)


async def back_to(pilot, screen: Screen[object], route: tuple[str, ...]) -> Screen[object]:  # type: ignore[no-untyped-def]
    """The screen under test again: the ones a key opened over it closed, or, if the key left it,
    reached afresh from the queue."""
    if screen not in pilot.app.screen_stack:
        await back_to_the_queue(pilot)
        return await reach(pilot, route)
    while pilot.app.screen is not screen:
        await pilot.app.pop_screen()
        await wait_until_loaded(pilot)
    return screen


SIZES = {"100x30": (100, 30), "60x30": (60, 30), "50x20": (50, 20)}
"""A desk's terminal, and a phone's SSH app in landscape and portrait."""


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("route", list(ROUTES))
async def test_every_bound_key_on_every_screen_leaves_the_app_running(
    route: str, size: str, sample_folder
) -> None:
    """Each key is pressed on the screen (reached afresh when the last key left it), at each size;
    the app must still run, with no error."""
    app = ReviewerApp(sample_folder(*FILES))
    async with app.run_test(size=SIZES[size]) as pilot:
        screen = await reach(pilot, ROUTES[route])
        keys = bound_keys(screen)
        assert keys, "no key is bound on this screen"
        for key in keys:
            await pilot.press(key)
            await wait_until_loaded(pilot)
            assert app.is_running, f"{key} on the {route} screen stopped the app"
            assert app._exception is None, f"{key} on the {route} screen: {app._exception!r}"
            if app.screen is not screen:
                screen = await back_to(pilot, screen, ROUTES[route])


async def test_b_and_t_in_the_drift_view_replace_the_plan_instead_of_crashing(sample_folder) -> None:
    """DuplicateIds: the old plan was removed without waiting and a new one with its id mounted."""
    folder = sample_folder("deskline-triage.rev1.json", "deskline-triage.rev2.json")
    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await reach(pilot, ("enter", "d"))
        assert isinstance(screen, DriftScreen)
        for key in ("b", "t", "b", "t", "t"):
            await pilot.press(key)
            await wait_until_loaded(pilot)
            assert len(screen.query(PlanView)) == 1
        assert app._exception is None


async def test_the_help_lists_every_key_of_every_screen(sample_folder) -> None:
    folder = sample_folder(*FILES)
    async with ReviewerApp(folder).run_test(size=(100, 30)) as pilot:
        for route, keys in ROUTES.items():
            if route == "help":
                continue
            screen = await reach(pilot, keys)
            wanted = {key_words(binding) for _, binding in _described(screen)}
            await pilot.press("question_mark")
            await wait_until_loaded(pilot)
            help_screen = pilot.app.screen
            if isinstance(screen, HelpScreen) or not isinstance(help_screen, HelpScreen):
                continue  # a text field takes "?" as a letter
            shown = "\n".join(
                " / ".join(entry[0] for entry in section[1]) for section in help_screen.sections
            )
            missing = {key for key in wanted if key not in shown}
            assert missing == set(), f"{route}: {missing} not in the help"
            await back_to_the_queue(pilot)


TEXTUAL_ONLY = frozenset(
    {"screen.copy_text", "app.copy_text", "copy_text", "screen.maximize", "screen.minimize"}
)


def _described(screen: Screen[object]):  # type: ignore[no-untyped-def]
    """The bindings the app itself declares (a widget of Textual's, such as a DataTable's scroll keys
    or its copy key, is Textual's to document)."""
    return [
        (key, active.binding)
        for key, active in screen.active_bindings.items()
        if active.binding.description
        and active.binding.action not in QUIT | TEXTUAL_ONLY
        and (active.binding.action, active.binding.description) in _declared(type(active.node))
    ]


def _declared(node_class: type) -> set[tuple[str, str]]:
    """(action, description) of the bindings the app's own classes declare, not Textual's bases."""
    declared: set[tuple[str, str]] = set()
    for cls in node_class.__mro__:
        if cls.__module__.startswith("reviewer"):
            for binding in cls.__dict__.get("BINDINGS", []):
                if isinstance(binding, Binding):
                    declared.add((binding.action, binding.description))
    return declared
