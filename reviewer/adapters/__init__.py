"""Adapters that put `reviewer.agent` where agents live: the OpenAI Agents SDK, LangGraph, MCP.

Each adapter module imports its framework and nothing else does: they sit in optional extras
(`pip install reviewer-gate[openai-agents]`, `[langgraph]`, `[mcp]`), so the core install pulls no framework.
They live beside `reviewer.agent` rather than inside it so that the agent library's import contract
stays about the library alone, and one forbidden contract keeps every framework out of the core.
"""
