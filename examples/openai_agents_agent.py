"""An OpenAI Agents SDK agent gated by the queue, against the sample ticket API.

Run `reviewer sample-api` and `reviewer serve`, mint an agent token, then:

    REVIEWER_AGENT_TOKEN=... python examples/openai_agents_agent.py

and approve the proposal in `reviewer` (the terminal app). The model here is scripted (no API key, no
network): it opens a ticket, then closes t1 and t2 into it with two parallel tool calls, reading the new
ticket's id from the first tool's answer, exactly as a real model would.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelResponse, RunConfig, Runner, Usage
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from reviewer.adapters.openai_agents import function_tools
from reviewer.agent import Gate, GateResult
from reviewer.sample_api.tools import AUDIT, DRY_RUN_QUERY, create_ticket, update_ticket

TASK = "Open a ticket 'Printer on fire' and close t1 and t2 into it."


class ScriptedModel(Model):
    """Stands in for an LLM: the same three turns every time, the ticket id read from the tool's answer."""

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
            return self._respond(
                self._call("update_ticket", id="t1", status="closed", mergedInto=ticket),
                self._call("update_ticket", id="t2", status="closed", mergedInto=ticket),
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


async def main(api_url: str, queue_url: str, *, poll_interval: float = 2.0) -> GateResult:
    agent = build_agent()

    async def task() -> None:
        await Runner.run(agent, TASK, run_config=RunConfig(tracing_disabled=True))

    async with Gate(
        api=api_url,
        queue=queue_url,
        audit=AUDIT,
        agent="deskline-openai-agents",
        poll_interval=poll_interval,
        backend="server",  # the sample API documents its dry-run parameter; the default is "record"
        dry_run_query=DRY_RUN_QUERY,
    ) as gate:
        result = await gate.run(task, title="Close t1 and t2 into a new ticket", description=TASK)
    result.raise_for_stop()  # a rejection, or a run that did not make every approved call, raises here
    return result


if __name__ == "__main__":
    outcome = asyncio.run(
        main(
            os.environ.get("SAMPLE_API", "http://127.0.0.1:8480"),
            os.environ.get("REVIEWER_QUEUE", "http://127.0.0.1:8470"),
        )
    )
    print(outcome.execution.summary() if outcome.execution else "nothing ran")
