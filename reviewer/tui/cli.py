"""The `reviewer demo` command (and, with the live queue, `reviewer review`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reviewer.sources import BUNDLED_SAMPLES


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="review sample proposals offline; decisions are not sent",
        description="Open the review screens on a folder of proposal files. No server, no credential: "
        "approvals and rejections are shown as 'not sent (demo)'.",
    )
    demo.add_argument(
        "folder",
        nargs="?",
        type=Path,
        default=BUNDLED_SAMPLES,
        help="a folder of proposal .json files (default: the bundled samples)",
    )
    demo.set_defaults(func=run_demo)


def run_demo(options: argparse.Namespace) -> int:
    folder: Path = options.folder
    if not folder.is_dir():
        print(f"reviewer demo: {folder} is not a folder of proposal files")
        return 2
    from reviewer.tui.app import ReviewerApp

    ReviewerApp(folder).run()
    return 0
