"""`reviewer passkey enroll|list|remove|export`: a reviewer's passkeys on a queue that serves review
pages (`serve --web-origin`), under the reviewer's own sign-in, as `reviewer approve` is.

`enroll` prints a one-time link (single use, ten minutes) whose page registers a passkey for the
signed-in reviewer alone; `export` writes every registered passkey to the file executors verify
passkey approvals with, offline (`--allowed-passkeys FILE`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    from reviewer.queue.trust import add_queue_options

    passkey = subparsers.add_parser(
        "passkey",
        help="enrol, list and remove your passkeys for the review page; export them for executors",
        description="Your passkeys on a queue that serves review pages (serve --web-origin), under your "
        "own sign-in (`reviewer login`, or REVIEWER_TOKEN).",
    )
    commands = passkey.add_subparsers(title="commands", metavar="COMMAND", required=True)
    enroll = commands.add_parser(
        "enroll",
        help="print a one-time link whose page registers a passkey for you",
        description="Print a link (single use, for ten minutes) whose page has a Register passkey button; "
        "the passkey registered there decides as you from the review pages. Open it on the phone or "
        "laptop that holds the passkey. Several passkeys are fine (a phone, a security key).",
    )
    add_queue_options(enroll)
    enroll.set_defaults(func=run_passkey, action="enroll")
    listing = commands.add_parser("list", help="your registered passkeys", description="Your passkeys.")
    add_queue_options(listing)
    listing.set_defaults(func=run_passkey, action="list")
    remove = commands.add_parser(
        "remove",
        help="remove one of your passkeys: it decides nothing from now",
        description="Remove one of your passkeys by its id (or a start of it no other of yours shares), "
        "as `reviewer passkey list` prints it. It decides nothing from the next request on.",
    )
    remove.add_argument("credential_id", metavar="ID")
    add_queue_options(remove)
    remove.set_defaults(func=run_passkey, action="remove")
    export = commands.add_parser(
        "export",
        help="write every registered passkey to the file executors verify approvals with",
        description="Write every passkey that may decide now (reviewer, id, public key, relying party) "
        "as the file `reviewer run --allowed-passkeys` and mcp-gate read: they verify a passkey's "
        "approval with it offline, as --allowed-signers verifies an SSH signature.",
    )
    export.add_argument("--out", type=Path, metavar="FILE", required=True, help="the file to write")
    add_queue_options(export)
    export.set_defaults(func=run_passkey, action="export")


def run_passkey(options: argparse.Namespace) -> int:
    from reviewer.queue.client import QueueClient
    from reviewer.queue.config import ConfigError, reviewer_settings
    from reviewer.queue.refusals import QueueError, QueueRefused

    command = f"reviewer passkey {options.action}"
    try:
        settings = reviewer_settings(options.queue, options.ca_file)
    except ConfigError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 2
    action: Callable[[QueueClient], Awaitable[str]] = ACTIONS[options.action](options)

    async def work() -> str:
        async with QueueClient(settings.queue_url, settings.credential()) as client:
            return await action(client)

    try:
        print(asyncio.run(work()))
    except QueueError as error:
        if (
            isinstance(error, QueueRefused)
            and error.status == 404
            and error.code == "not_found"
            and options.action != "remove"
        ):
            print(
                f"{command}: this queue serves no review pages (start it with --web-origin)", file=sys.stderr
            )
        else:
            print(f"{command}: {error}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 2
    return 0


def _enroll(options: argparse.Namespace) -> Callable[[Any], Awaitable[str]]:
    async def enroll(client: Any) -> str:
        made = await client.enrolment_link()
        until = made.expires_at.strftime("%H:%M:%S UTC")
        return (
            f"Open this link on the device that holds your passkey (once, until {until}), and press "
            f"Register passkey; it registers a passkey for {made.reviewer}:\n{made.link}"
        )

    return enroll


def _list(options: argparse.Namespace) -> Callable[[Any], Awaitable[str]]:
    from reviewer.plan.sanitize import safe_text

    async def listing(client: Any) -> str:
        found = (await client.list_passkeys()).passkeys
        if not found:
            return "no passkey is registered for you; `reviewer passkey enroll` prints a link to add one"
        return "\n".join(
            f"{item.credential_id}  {safe_text(item.label)}  added {item.added_at:%Y-%m-%d %H:%M} UTC  "
            f"used {item.sign_count} times"
            for item in found
        )

    return listing


def _remove(options: argparse.Namespace) -> Callable[[Any], Awaitable[str]]:
    async def remove(client: Any) -> str:
        await client.remove_passkey(options.credential_id)
        return f"removed the passkey {options.credential_id}: it decides nothing from now"

    return remove


def _export(options: argparse.Namespace) -> Callable[[Any], Awaitable[str]]:
    from reviewer.signing.passkeys import AllowedPasskeys

    async def export(client: Any) -> str:
        text = (await client.export_passkeys()).decode()
        exported = AllowedPasskeys.parse(text, "the queue's answer")
        options.out.write_text(text)
        reviewers = len(exported.reviewers())
        return f"wrote {len(exported.passkeys)} passkey(s) of {reviewers} reviewer(s) to {options.out}"

    return export


ACTIONS: dict[str, Callable[[argparse.Namespace], Callable[[Any], Awaitable[str]]]] = {
    "enroll": _enroll,
    "list": _list,
    "remove": _remove,
    "export": _export,
}
