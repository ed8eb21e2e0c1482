"""Write tools as OpenAI Agents SDK function tools (`pip install reviewer[openai-agents]`).

    agent = Agent(name="deskline", tools=function_tools(create_ticket, update_ticket, delete_ticket))
    result = await gate.run(lambda: Runner.run(agent, "Merge t1 and t2 ..."), title="Merge t1 and t2")

`function_tool(create_ticket)` alone works too (a write tool is a plain async function with its declared
signature); what this adds is the error policy. The SDK's default turns every exception of a tool into
text for the model, which would let a model read a stop of the real run as advice and carry on. Here
only a wrong argument goes back to the model; anything else the gate raises ends the agent's run.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, RunContextWrapper, function_tool

from reviewer.agent.tools import GatedTool, ToolArgumentError


def model_error_or_raise(context: RunContextWrapper[Any], error: Exception) -> str:
    """The SDK's failure policy for a write tool: the model may fix its own arguments, nothing else."""
    if isinstance(error, ToolArgumentError):
        return f"The tool was called with wrong arguments: {error}. Call it again with the declared ones."
    raise error


def function_tools(*tools: GatedTool, **options: Any) -> list[FunctionTool]:
    """Each write tool as a function tool, with the gate's error policy; `options` go to `function_tool`."""
    return [function_tool(tool, failure_error_function=model_error_or_raise, **options) for tool in tools]
