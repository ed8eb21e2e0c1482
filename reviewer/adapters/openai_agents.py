"""Write tools as OpenAI Agents SDK function tools (`pip install reviewer-gate[openai-agents]`).

    agent = Agent(name="deskline", tools=function_tools(create_ticket, update_ticket, delete_ticket))
    result = await gate.run(lambda: Runner.run(agent, "Merge t1 and t2 ..."), title="Merge t1 and t2")

A reviewer who asks for changes gets a re-plan: give `Gate.run` a task that takes `feedback` and pass
`replan_input(TASK, feedback)` to `Runner.run`, with `max_revisions=2` or more. The model then reads the
reviewer's reason as a message after the task, and its new plan is submitted as the next revision.

`function_tool(create_ticket)` alone works too (a write tool is a plain async function with its declared
signature); what this adds is the error policy. The SDK's default turns every exception of a tool into
text for the model, which would let a model read a stop of the real run as advice and carry on. Here
only a wrong argument goes back to the model; anything else the gate raises ends the agent's run.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, RunContextWrapper, TResponseInputItem, function_tool

from reviewer.agent.feedback import Feedback
from reviewer.agent.tools import GatedTool, ToolArgumentError

REPLAN_ASK = "Plan the task again with this change; the new plan is reviewed before anything runs."


def model_error_or_raise(context: RunContextWrapper[Any], error: Exception) -> str:
    """The SDK's failure policy for a write tool: the model may fix its own arguments, nothing else."""
    if isinstance(error, ToolArgumentError):
        return f"The tool was called with wrong arguments: {error}. Call it again with the declared ones."
    raise error


def function_tools(*tools: GatedTool, **options: Any) -> list[FunctionTool]:
    """Each write tool as a function tool, with the gate's error policy; `options` go to `function_tool`."""
    return [function_tool(tool, failure_error_function=model_error_or_raise, **options) for tool in tools]


def replan_input(task: str, feedback: Feedback | None) -> str | list[TResponseInputItem]:
    """The input of `Runner.run` for one plan: the task alone on the first plan; on a re-plan, the task
    and then the reviewer's words as a user message (text for the model to read, never run)."""
    if feedback is None:
        return task
    return [
        {"role": "user", "content": task},
        {"role": "user", "content": f"{feedback}. {REPLAN_ASK}"},
    ]
