"""COMMAND as a child process that holds nothing: a loopback URL, the proposal id, and an environment
without the API's credential, any queue token or the agent socket, in the sandbox `reviewer.sandbox.modes`
chose. It runs in a session of its own, so a timeout or a stopped dry run ends it and every process it
started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from reviewer.run.errors import RunRefused
from reviewer.sandbox.environment import sandboxed_environment
from reviewer.sandbox.handover import InnerService, serve_handed
from reviewer.sandbox.modes import Sandbox

API_URL_ENV: Final = "REVIEWER_API_URL"
PROPOSAL_ID_ENV: Final = "REVIEWER_PROPOSAL_ID"
STOP_GRACE_SECONDS: Final = 5.0


def child_environment(
    environ: Mapping[str, str],
    *,
    api_url: str,
    proposal_id: str,
    withheld: Iterable[str] = (),
    secrets: Iterable[str] = (),
) -> dict[str, str]:
    """The child's environment: the parent's as a sandbox may hold it, with the gate's URL."""
    environment = sandboxed_environment(environ, withheld, secrets)
    environment[API_URL_ENV] = api_url
    environment[PROPOSAL_ID_ENV] = proposal_id
    return environment


@dataclass(frozen=True)
class ChildExit:
    """How the child ended: its exit status, or that the gate or the clock stopped it."""

    returncode: int | None
    timed_out: bool = False
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.stopped

    def describe(self, timeout: float) -> str:
        if self.timed_out:
            return f"COMMAND did not exit within {timeout:g} s (--timeout) and was killed"
        if self.stopped:
            return "COMMAND was stopped"
        if self.returncode is not None and self.returncode < 0:
            return f"COMMAND was killed by signal {-self.returncode}"
        return f"COMMAND exited with status {self.returncode}"


async def run_child(
    command: Sequence[str],
    environment: Mapping[str, str],
    *,
    timeout: float,
    stop: asyncio.Event,
    sandbox: Sandbox,
    inner_services: Sequence[InnerService] = (),
) -> ChildExit:
    """Run COMMAND in `sandbox` to its end, or until `timeout` seconds pass or `stop` is set, then end
    its session and whatever it left behind. Where it has a network of its own, `inner_services` (the
    gate, the proxy) are served on the listeners its relay hands out, for as long as it runs."""
    if sandbox.prefix and shutil.which(command[0]) is None:
        raise RunRefused(f"cannot start {command[0]!r}: no such program")
    ports = [service.port for service in inner_services] if sandbox.private_network else []
    with sandbox.launch(command, ports) as launch:
        try:
            process = await asyncio.create_subprocess_exec(
                *launch.argv, env=dict(environment), start_new_session=True, pass_fds=launch.pass_fds
            )
        except OSError as error:
            raise RunRefused(f"cannot start {command[0]!r}: {error.strerror or error}") from None
        finally:
            launch.started()
        try:
            async with contextlib.AsyncExitStack() as serving:
                if launch.handover is not None:
                    await serve_handed(serving, launch.handover, inner_services)
                return await _until_ended(process, timeout, stop)
        finally:
            if process.returncode is None:
                await asyncio.shield(_end_session(process))
            await asyncio.to_thread(sandbox.end_leftovers)


async def _until_ended(process: asyncio.subprocess.Process, timeout: float, stop: asyncio.Event) -> ChildExit:
    waiting = asyncio.ensure_future(process.wait())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait(
            {waiting, stopping}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if waiting in done:
            return ChildExit(process.returncode)
        await _end_session(process)
        return ChildExit(process.returncode, timed_out=not done, stopped=bool(done))
    finally:
        stopping.cancel()
        waiting.cancel()


async def _end_session(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to the child's whole session, then SIGKILL if it is still there after a grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_SECONDS)
            return
        except TimeoutError:
            continue
