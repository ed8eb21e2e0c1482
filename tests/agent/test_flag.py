"""The dry-run flag belongs to the run: on by default, restored at exit, never shared between tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from reviewer.agent import NoActiveRun, dry_run, is_dry_run, local_approval, real_run
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.helpers import received

REAL_TITLES = ("real 1", "real 2", "real 3")
DRY_TITLES = ("dry 1", "dry 2", "dry 3")


SERVER: dict[str, Any] = {"dry_run_query": tools.DRY_RUN_QUERY}
"""The sample API's documented dry-run parameter, for a server dry run."""


async def create_each(titles: tuple[str, ...], seen: list[bool]) -> None:
    for title in titles:
        await asyncio.sleep(0.005)  # let the other run take a turn between calls
        seen.append(is_dry_run())
        await tools.create_ticket(title=title)
        seen.append(is_dry_run())


async def approved_plan_for(titles: tuple[str, ...], base_url: str):  # type: ignore[no-untyped-def]
    async with dry_run("record") as recording:
        await create_each(titles, [])
    proposal = recording.to_proposal(
        proposal_id="creates", title="creates", agent=tools.AGENT, target=tools.target(base_url)
    )
    return local_approval(proposal)


def test_the_flag_is_on_outside_any_run_and_a_write_tool_there_refuses(sample_api: RunningSampleApi) -> None:
    assert is_dry_run() is True
    with pytest.raises(NoActiveRun, match="outside a run"):
        asyncio.run(tools.create_ticket(title="nobody decided"))
    assert received(sample_api) == []


def test_a_run_puts_the_previous_value_back_even_when_nested_or_failing(sample_api: RunningSampleApi) -> None:
    async def scenario() -> list[bool]:
        seen = [is_dry_run()]
        approval = await approved_plan_for(("x",), sample_api.base_url)
        async with (
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
            dry_run("server", client=api, **SERVER),
        ):
            seen.append(is_dry_run())
            with pytest.raises(RuntimeError):
                async with real_run(approval, client=api):
                    seen.append(is_dry_run())
                    raise RuntimeError("the task failed")
            seen.append(is_dry_run())
        seen.append(is_dry_run())
        return seen

    assert asyncio.run(scenario()) == [True, True, False, True, True]


def test_a_dry_run_and_a_real_run_at_once_each_keep_their_own_flag(sample_api: RunningSampleApi) -> None:
    """Two asyncio tasks interleave call by call; the dry one never writes, the real one always does."""
    dry_seen: list[bool] = []
    real_seen: list[bool] = []

    async def scenario() -> None:
        approval = await approved_plan_for(REAL_TITLES, sample_api.base_url)
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:

            async def dry_task() -> None:
                async with dry_run(
                    "server", client=api, audit=tools.AUDIT, dry_run_query=tools.DRY_RUN_QUERY
                ) as recording:
                    await create_each(DRY_TITLES, dry_seen)
                assert recording.writes_kept == 0

            async def real_task() -> None:
                async with real_run(approval, client=api) as execution:
                    await create_each(REAL_TITLES, real_seen)
                assert execution.stop is None

            await asyncio.gather(dry_task(), real_task())

    asyncio.run(scenario())
    assert dry_seen == [True] * 6 and real_seen == [False] * 6
    requests = received(sample_api)
    order = [request["body"]["title"] for request in requests]
    assert order != sorted(order, key=lambda title: title.startswith("real")), "the runs did not interleave"
    for request in requests:
        expected_query = {"dryRun": "All"} if request["body"]["title"].startswith("dry") else {}
        assert request["query"] == expected_query, request
    titles = sorted(ticket["title"] for ticket in sample_api.store.tickets.values())
    assert titles == ["Ticket t1", "Ticket t2", "Ticket t3", *REAL_TITLES]


class ModuleLevelFlag:
    """What the flag would be without a ContextVar: one value for the whole process."""

    dry = True


@contextmanager
def module_level_run(*, dry: bool) -> Iterator[None]:
    previous = ModuleLevelFlag.dry
    ModuleLevelFlag.dry = dry
    try:
        yield
    finally:
        ModuleLevelFlag.dry = previous


async def naive_create(api: httpx.AsyncClient, title: str) -> None:
    """A write tool reading the module-level flag."""
    await api.post(
        "/v1/tickets", params={"dryRun": "All"} if ModuleLevelFlag.dry else None, json={"title": title}
    )


async def interleave(dry_block, real_block) -> None:  # type: ignore[no-untyped-def]
    """The dry run starts, the real run starts while the dry one awaits, then the dry one writes."""
    real_started = asyncio.Event()
    dry_done = asyncio.Event()

    async def dry_side() -> None:
        await dry_block(real_started)
        dry_done.set()

    async def real_side() -> None:
        await real_block(real_started, dry_done)

    await asyncio.gather(dry_side(), real_side())


def test_a_module_level_flag_would_have_leaked_a_real_write_into_the_dry_run(
    sample_api: RunningSampleApi,
) -> None:
    """Why the flag is a ContextVar: the same interleaving, a global flag writes for real, ours does not."""

    async def with_module_level_flag() -> None:
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:

            async def dry_block(real_started: asyncio.Event) -> None:
                with module_level_run(dry=True):
                    await real_started.wait()
                    await naive_create(api, "meant to be dry (global flag)")

            async def real_block(real_started: asyncio.Event, dry_done: asyncio.Event) -> None:
                with module_level_run(dry=False):
                    real_started.set()
                    await dry_done.wait()

            await interleave(dry_block, real_block)

    async def with_context_var() -> None:
        approval = await approved_plan_for((), sample_api.base_url)
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:

            async def dry_block(real_started: asyncio.Event) -> None:
                async with dry_run("server", client=api, **SERVER):
                    await real_started.wait()
                    await tools.create_ticket(title="meant to be dry (ContextVar)")

            async def real_block(real_started: asyncio.Event, dry_done: asyncio.Event) -> None:
                async with real_run(approval, client=api):
                    real_started.set()
                    await dry_done.wait()

            await interleave(dry_block, real_block)

    asyncio.run(with_module_level_flag())
    leaked = [
        ticket["title"] for ticket in sample_api.store.tickets.values() if ticket["id"].startswith("tk-")
    ]
    assert leaked == ["meant to be dry (global flag)"], "the global flag should have leaked a real write"

    asyncio.run(with_context_var())
    last = received(sample_api)[-1]
    assert last["body"] == {"title": "meant to be dry (ContextVar)"} and last["query"] == {"dryRun": "All"}
    assert [
        ticket["title"] for ticket in sample_api.store.tickets.values() if ticket["id"].startswith("tk-")
    ] == leaked
