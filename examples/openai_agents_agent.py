"""An OpenAI Agents SDK agent gated by the queue, against the sample ticket API.

Run `reviewer sample-api` and `reviewer serve`, mint an agent token, then:

    REVIEWER_AGENT_TOKEN=... python examples/openai_agents_agent.py

and approve the proposal in `reviewer` (the terminal app). The model here is scripted (no API key, no
network): it opens a ticket, then closes t1 and t2 into it and closes t3 with parallel tool calls, reading
the new ticket's id from the first tool's answer, exactly as a real model would. Ask for changes in
`reviewer` (key `c`) with "keep t3 open": the model reads your reason and plans again without closing t3,
and that plan comes back to you as revision 2 of the same proposal.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelResponse, RunConfig, Runner, Usage
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from reviewer.adapters.openai_agents import REPLAN_ASK, function_tools, replan_input
from reviewer.agent import Feedback, Gate, GateResult
from reviewer.sample_api.tools import AUDIT, DRY_RUN_QUERY, create_ticket, update_ticket

__all__ = ["REPLAN_ASK", "TASK", "ScriptedModel", "build_agent", "main"]

TASK = "Open a ticket 'Printer on fire', close t1 and t2 into it, and close t3."
KEEP_OPEN = re.compile(r"keep (t\d+) open")


class ScriptedModel(Model):
    """Stands in for an LLM: the same three turns every time, the ticket id read from the tool's answer,
    and t3 left open when a user message says to keep it open."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        answers = [
            item for item in input if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if not answers:
            return self._respond(self._call("create_ticket", title="Printer on fire"))
        if len(answers) == 1:
            ticket = json.loads(answers[0]["output"])["result"]["id"]
            t3 = (
                []
                if "t3" in self._kept_open(input)
                else [self._call("update_ticket", id="t3", status="closed")]
            )
            return self._respond(
                self._call("update_ticket", id="t1", status="closed", mergedInto=ticket),
                self._call("update_ticket", id="t2", status="closed", mergedInto=ticket),
                *t3,
            )
        notes = " / ".join(json.loads(answer["output"]).get("note", "") for answer in answers[1:])
        message = ResponseOutputMessage(
            id="msg",
            role="assistant",
            status="completed",
            type="message",
            content=[ResponseOutputText(type="output_text", text=f"Done. {notes}", annotations=[])],
        )
        return self._respond(message)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")

    @staticmethod
    def _kept_open(input: Any) -> set[str]:
        """The tickets the user's messages ask to keep open (a reviewer's reason arrives as one)."""
        said = [
            str(item.get("content", ""))
            for item in input
            if isinstance(item, dict) and item.get("role") == "user"
        ]
        return {ticket for text in said for ticket in KEEP_OPEN.findall(text)}

    def _call(self, name: str, **arguments: Any) -> ResponseFunctionToolCall:
        number = next(self._ids)
        return ResponseFunctionToolCall(
            type="function_call",
            id=f"fc-{number}",
            call_id=f"call-{number}",
            name=name,
            arguments=json.dumps(arguments),
        )

    @staticmethod
    def _respond(*output: Any) -> ModelResponse:
        return ModelResponse(output=list(output), usage=Usage(), response_id=None)


def build_agent() -> Agent[Any]:
    return Agent(
        name="deskline",
        instructions="You manage tickets.",
        model=ScriptedModel(),
        tools=function_tools(create_ticket, update_ticket),  # the gate's tools, registered unchanged
    )


async def main(
    api_url: str, queue_url: str, *, poll_interval: float = 2.0, max_revisions: int = 3
) -> GateResult:
    agent = build_agent()

    async def task(feedback: Feedback | None = None) -> None:
        # a reviewer's request for changes reaches the model as a message after the task
        await Runner.run(agent, replan_input(TASK, feedback), run_config=RunConfig(tracing_disabled=True))

    async with Gate(
        api=api_url,
        queue=queue_url,
        audit=AUDIT,
        agent="deskline-openai-agents",
        poll_interval=poll_interval,
        backend="server",  # the sample API documents its dry-run parameter; the default is "record"
        dry_run_query=DRY_RUN_QUERY,
    ) as gate:
        result = await gate.run(
            task,
            title="Close t1 and t2 into a new ticket, close t3",
            description=TASK,
            max_revisions=max_revisions,  # re-plan on a request for changes, up to this many plans
        )
    result.raise_for_stop()  # a rejection, changes asked too often, or an incomplete run raises here
    return result


if __name__ == "__main__":
    outcome = asyncio.run(
        main(
            os.environ.get("SAMPLE_API", "http://127.0.0.1:8480"),
            os.environ.get("REVIEWER_QUEUE", "http://127.0.0.1:8470"),
        )
    )
    print(outcome.execution.summary() if outcome.execution else "nothing ran")
