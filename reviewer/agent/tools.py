"""Write tools: a decorator that turns "arguments -> HTTP request" into a tool every run can dry-run.

A write tool is declared as a plain function from its arguments to the `HttpRequest` it would send.
It never sends anything itself: the active run decides, from the runner-owned flag, whether the
request goes to a dry-run backend or, in an approved real run, to the API. Read tools need none of
this and are left as ordinary functions.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, Union, get_args, get_origin, get_type_hints

from reviewer.agent.errors import AgentError, NoActiveRun, ToolDefinitionError
from reviewer.agent.http import CallAnswer, HttpRequest
from reviewer.dry_run_params import names_dry_run
from reviewer.proposal import Effect

WRITE_EFFECTS = ("create", "update", "delete", "other")


class ToolRunner(Protocol):
    """What a write tool reports to: a dry recording or an approved real execution."""

    async def perform(
        self, tool: WriteTool, arguments: dict[str, Any], dropped: tuple[str, ...]
    ) -> CallAnswer: ...


ACTIVE_RUN: Final[ContextVar[ToolRunner | None]] = ContextVar("reviewer_agent_active_run", default=None)
"""The run that write tools report to; None outside any run (a write tool then refuses to act).
Set with the dry-run flag by `reviewer.agent.flag.run_scope`."""


class ToolArgumentError(AgentError, TypeError):
    """The model called a write tool without an argument the tool requires."""


@dataclass(frozen=True)
class WriteTool:
    """A write tool: its name, effect, declared parameters, and the function building its request."""

    name: str
    effect: Effect
    build: Callable[..., HttpRequest]
    produces: tuple[str, ...] = ()
    description: str = ""
    signature: inspect.Signature = field(repr=False, default=inspect.Signature())

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(self.signature.parameters)

    def accept(self, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        """Split what the model sent into the declared arguments and the names dropped.

        Only what the schema declares reaches the API; a `dryRun` the model adds is dropped here,
        so the flag stays the runner's alone.
        """
        declared = {name: value for name, value in arguments.items() if name in self.signature.parameters}
        dropped = tuple(name for name in arguments if name not in self.signature.parameters)
        try:
            self.signature.bind(**declared)
        except TypeError as error:
            raise ToolArgumentError(f"write tool {self.name!r}: {error}") from None
        return declared, dropped

    def request_for(self, arguments: Mapping[str, Any]) -> HttpRequest:
        request = self.build(**arguments)
        if not isinstance(request, HttpRequest):
            raise ToolDefinitionError(
                f"write tool {self.name!r} must return an HttpRequest, not {type(request).__name__}"
            )
        return request

    async def __call__(self, **arguments: Any) -> CallAnswer:
        runner = ACTIVE_RUN.get()
        if runner is None:
            raise NoActiveRun(self.name)
        declared, dropped = self.accept(arguments)
        return await runner.perform(self, declared, dropped)

    def schema(self) -> dict[str, Any]:
        """A JSON-schema tool definition for the model: only these arguments will ever be passed on."""
        hints = get_type_hints(self.build)
        properties = {name: _json_type(hints.get(name, Any)) for name in self.signature.parameters}
        required = [
            name
            for name, parameter in self.signature.parameters.items()
            if parameter.default is inspect.Parameter.empty
        ]
        return {
            "name": self.name,
            "description": self.description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        }


def write_tool(
    *, effect: Effect, produces: tuple[str, ...] = (), name: str | None = None
) -> Callable[[Callable[..., HttpRequest]], WriteTool]:
    """Declare a write tool: `effect` says what it does, `produces` the fields only a real write yields.

    Refused at declaration, so a mistake shows at import and not in production: a `read` effect (read
    tools are not wrapped), `*args`/`**kwargs` (the schema must be explicit for arguments to be
    filtered), and a parameter named like the dry-run flag (the model must never steer it).
    """
    if effect not in WRITE_EFFECTS:
        raise ToolDefinitionError(
            f"effect {effect!r} is not a write; use one of {', '.join(WRITE_EFFECTS)} "
            "(read tools stay ordinary functions)"
        )

    def declare(build: Callable[..., HttpRequest]) -> WriteTool:
        tool_name = name or build.__name__
        signature = inspect.signature(build)
        for parameter in signature.parameters.values():
            if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise ToolDefinitionError(
                    f"write tool {tool_name!r} takes *{parameter.name}; declare every argument "
                    "so undeclared ones can be dropped"
                )
            if names_dry_run(parameter.name):
                raise ToolDefinitionError(
                    f"write tool {tool_name!r} declares {parameter.name!r}; the dry-run flag belongs "
                    "to the runner, never to the model: remove the parameter"
                )
        return WriteTool(
            name=tool_name,
            effect=effect,
            build=build,
            produces=tuple(produces),
            description=inspect.getdoc(build) or "",
            signature=signature,
        )

    return declare


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [_json_type(arg) for arg in get_args(annotation) if arg is not type(None)]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is Literal:
        return {"enum": list(get_args(annotation))}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    if annotation is dict or origin is dict:
        return {"type": "object"}
    if annotation is list or origin is list:
        return {"type": "array"}
    return {}
