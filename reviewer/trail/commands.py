"""`reviewer trail checkpoint`, `reviewer trail export` and `reviewer trail verify`: the queue's trail
as an auditor reads it, and checks it offline.

`checkpoint` prints the newest signed checkpoint (keep it: it is what a later export is checked
against); `export` writes every entry from `--since N` as JSON lines behind that checkpoint, under a
reviewer's or auditor's token; `verify` needs no queue at all: the export, the queue's public key
and, if you kept one, an earlier checkpoint (`reviewer.trail.verify`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO


def register(subparsers: Any) -> None:
    from reviewer.queue.trust import add_queue_options

    trail = subparsers.add_parser(
        "trail",
        help="the trail's signed checkpoints: print one, export the entries, verify an export offline",
        description="The queue's trail is an append-only Merkle log whose checkpoints the queue signs "
        "(serve --trail-key). Print the newest checkpoint, export the entries, or verify an export.",
    )
    commands = trail.add_subparsers(title="trail commands", metavar="COMMAND", required=True)
    checkpoint = commands.add_parser("checkpoint", help="print the queue's newest signed checkpoint")
    add_queue_options(checkpoint)
    checkpoint.set_defaults(func=run_checkpoint)

    export = commands.add_parser(
        "export", help="write every entry as JSON lines, with the checkpoint that proves them"
    )
    add_queue_options(export)
    export.add_argument(
        "--since",
        type=int,
        default=0,
        metavar="N",
        help="begin at entry N (the size of a checkpoint you kept)",
    )
    export.add_argument("--output", "-o", type=Path, metavar="FILE", help="write here, not to stdout")
    export.add_argument(
        "--ocsf",
        action="store_true",
        help="write OCSF API Activity events (class 6003) for a SIEM instead; they carry no proof",
    )
    export.set_defaults(func=run_export)

    prove = commands.add_parser(
        "prove", help="write one entry with its inclusion proof in the tree a checkpoint signs"
    )
    prove.add_argument("index", type=int, metavar="INDEX", help="the entry's position (from 0)")
    add_queue_options(prove)
    prove.add_argument(
        "--size", type=int, metavar="N", help="the size of a checkpoint you kept (default: the newest)"
    )
    prove.add_argument("--output", "-o", type=Path, metavar="FILE", help="write here, not to stdout")
    prove.set_defaults(func=run_prove)

    verify = commands.add_parser(
        "verify",
        help="check an export offline: every leaf, the tree, and a checkpoint seen before",
        description="Exit 0 when every entry of FILE hashes to its leaf, the entries make the tree "
        "the export's checkpoint signs with KEY, and (with --checkpoint) that tree extends the one "
        "of a checkpoint seen before; otherwise exit 1 naming the first entry or checkpoint that fails.",
    )
    verify.add_argument(
        "file", type=Path, metavar="FILE", help="an export or an entry's proof (`-` reads stdin)"
    )
    verify.add_argument("--key", type=Path, required=True, metavar="KEY.pub", help="the queue's trail key")
    verify.add_argument(
        "--checkpoint", type=Path, metavar="CP", help="a checkpoint kept from before (`trail checkpoint`)"
    )
    verify.set_defaults(func=run_verify)


class TrailCommandFailed(Exception):
    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _run(name: str, options: argparse.Namespace, work: Any) -> int:
    try:
        return int(asyncio.run(work(options)))
    except TrailCommandFailed as error:
        print(f"reviewer trail {name}: {error}", file=sys.stderr)
        return error.exit_code


def run_checkpoint(options: argparse.Namespace) -> int:
    return _run("checkpoint", options, _checkpoint)


def run_export(options: argparse.Namespace) -> int:
    return _run("export", options, _export)


def run_prove(options: argparse.Namespace) -> int:
    return _run("prove", options, _prove)


async def _prove(options: argparse.Namespace) -> int:
    from reviewer.queue.refusals import QueueError

    if options.index < 0 or (options.size is not None and options.size <= options.index):
        raise TrailCommandFailed("INDEX is an entry's position, 0 or more, and below --size", 2)
    async with await _client(options) as client:
        try:
            document = await client.trail_proof(options.index, options.size)
        except QueueError as error:
            raise TrailCommandFailed(str(error)) from None
    _write(options.output, document)
    return 0


def _write(output: Path | None, data: bytes) -> None:
    try:
        if output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            output.write_bytes(data)
    except OSError as error:
        raise TrailCommandFailed(f"cannot write {output}: {error.strerror}", 2) from None


async def _client(options: argparse.Namespace) -> Any:
    from reviewer.queue.client import QueueClient
    from reviewer.queue.config import ConfigError, load_settings
    from reviewer.queue.trust import use_ca_file

    try:
        use_ca_file(options.ca_file)
        settings = load_settings(options.queue)
    except ConfigError as error:
        raise TrailCommandFailed(str(error), 2) from None
    return QueueClient(settings.queue_url, settings.credential())


async def _checkpoint(options: argparse.Namespace) -> int:
    from reviewer.queue.refusals import QueueError

    async with await _client(options) as client:
        try:
            answer = await client.trail_checkpoint()
        except QueueError as error:
            raise TrailCommandFailed(str(error)) from None
    from reviewer.trail.checkpoint import CheckpointError, parse

    note = answer.checkpoint
    try:  # the queue's text reaches the terminal only as a checkpoint, with nothing a terminal obeys
        parse(note, "the queue's checkpoint")
        if not all(line.isprintable() for line in note.split("\n")):
            raise CheckpointError("the queue's checkpoint holds control characters")
    except CheckpointError as error:
        raise TrailCommandFailed(str(error)) from None
    sys.stdout.write(note)
    return 0


async def _export(options: argparse.Namespace) -> int:
    from reviewer.queue.refusals import QueueError

    if options.since < 0:
        raise TrailCommandFailed("--since is an entry number, 0 or more", 2)
    try:
        target: BinaryIO = options.output.open("wb") if options.output else sys.stdout.buffer
    except OSError as error:
        raise TrailCommandFailed(f"cannot write {options.output}: {error.strerror}", 2) from None
    try:
        async with await _client(options) as client:
            chunks = client.trail_export(options.since)
            async for chunk in _as_ocsf(chunks) if options.ocsf else chunks:
                target.write(chunk)
    except QueueError as error:
        raise TrailCommandFailed(str(error)) from None
    finally:
        target.flush()
        if options.output:
            target.close()
    return 0


async def _as_ocsf(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The export's entries, line by line as they stream, as OCSF events (the header gives the origin);
    a last line without its newline is converted too."""
    pending, origin, number = b"", None, 0
    async for chunk in chunks:
        *lines, pending = (pending + chunk).split(b"\n")
        converted = []
        for line in lines:
            number += 1
            origin, event = _ocsf_line(line, number, origin)
            converted.append(event)
        yield b"".join(converted)
    if pending.strip():
        yield _ocsf_line(pending, number + 1, origin)[1]


def _ocsf_line(line: bytes, number: int, origin: str | None) -> tuple[str, bytes]:
    """The origin the export's header names (the header itself converts to nothing), and the OCSF
    event of an entry line; an unreadable line is refused by its number, quoting none of it."""
    import json

    from reviewer.trail.checkpoint import CheckpointError, parse
    from reviewer.trail.merkle import decoded_hash
    from reviewer.trail.ocsf import api_activity

    where = f"line {number} of the queue's export"
    try:
        document = json.loads(line)
    except json.JSONDecodeError as error:
        raise TrailCommandFailed(f"{where} is not JSON ({error.msg}, column {error.colno})") from None
    except ValueError:
        raise TrailCommandFailed(f"{where} is not UTF-8 text") from None
    except RecursionError:
        raise TrailCommandFailed(f"{where} nests deeper than any trail entry") from None
    if origin is None:
        try:
            return parse(document["checkpoint"]).origin, b""
        except (KeyError, TypeError, AttributeError, CheckpointError) as error:
            why = str(error) if isinstance(error, CheckpointError) else "its first line names none"
            raise TrailCommandFailed(f"the queue's export has no readable checkpoint ({why})") from None
    try:
        if not isinstance(document["leaf_hash"], str) or decoded_hash(document["leaf_hash"]) is None:
            raise ValueError("leaf_hash")
        event = api_activity(document["leaf"], document["leaf_hash"], origin)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise TrailCommandFailed(
            f"{where} is not a trail entry (an object with a leaf, its time and its leaf_hash)"
        ) from None
    return origin, json.dumps(event, ensure_ascii=False).encode() + b"\n"


def run_verify(options: argparse.Namespace) -> int:
    from reviewer.trail.checkpoint import CheckpointError, load_public_key
    from reviewer.trail.verify import TrailInvalid, verify_export

    try:
        key = load_public_key(options.key)
        earlier = None
        if options.checkpoint is not None:
            earlier = options.checkpoint.read_text(errors="replace")
        source: BinaryIO = sys.stdin.buffer if str(options.file) == "-" else options.file.open("rb")
    except CheckpointError as error:
        print(f"reviewer trail verify: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"reviewer trail verify: cannot read {error.filename}: {error.strerror}", file=sys.stderr)
        return 2
    try:
        with source:
            verified = verify_export(source, key, earlier)
    except TrailInvalid as error:
        print(f"reviewer trail verify: {options.file}: {error}", file=sys.stderr)
        return 1
    if verified.proof:
        print(f"verified: entry {verified.since} is in the {verified.checkpoint.describe()}")
        return 0
    extends = "" if earlier is None else ", which extends the checkpoint seen before"
    print(
        f"verified: {verified.entries} entries from entry {verified.since} make the "
        f"{verified.checkpoint.describe()}{extends}"
    )
    return 0
