"""How the live app tells of a newly pending proposal, as `[alerts]` in config.toml sets it.

A module of its own, free of the config file's reader, so the app's first paint does not import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

DesktopProtocol = Literal["osc9", "osc777"]
DESKTOP_PROTOCOLS: Final[tuple[DesktopProtocol, ...]] = ("osc9", "osc777")


@dataclass(frozen=True)
class TerminalAlerts:
    """How the live app tells of a newly pending proposal: `[alerts]` in config.toml.

    `desktop` is True (the terminal's own protocol, where it is known to have one), False, or a
    protocol named outright ("osc9", "osc777"), for a terminal whose name does not travel over SSH.
    """

    bell: bool = True
    title: bool = True
    desktop: bool | DesktopProtocol = True
