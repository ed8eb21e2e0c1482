"""Write tools: decorators that turn "arguments -> a write" into a tool every run can dry-run.

An HTTP write tool is declared as a plain function from its arguments to the `HttpRequest` it would
send (`write_tool`); a tool built on a vendor SDK as the function making the real call, with an
optional dry-run callable beside it (`sdk_tool`). Neither writes by itself: the active run decides,
from the runner-owned flag, whether the call goes to a dry-run backend or, in an approved real run,
to the API. What the decorators return is a real `async def` function with the declared signature, so
agent frameworks register it unchanged. Read tools need none of this and stay ordinary functions.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Coroutine, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, Union, cast, get_args, get_origin, get_type_hints

from reviewer.agent.errors import AgentError, NoActiveRun, ToolDefinitionError
from reviewer.agent.http_values import CallAnswer, HttpRequest, path_problem
from reviewer.plan.dry_run_params import names_dry_run
from reviewer.plan.proposal import Effect

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
    """What a write tool declares: its name, effect, parameters, and how it writes.

    An HTTP tool has `build` (arguments -> the `HttpRequest` it would send): every backend can answer
    it. A tool built on a vendor SDK has `write` (arguments -> the SDK's answer, the real write) and,
    when the SDK has a way to check a call without making it, `dry_write`: it is answered by that in a
    dry run, or only recorded. The function the decorators return carries this as `.spec`.
    """

    name: str
    effect: Effect
    build: Callable[..., HttpRequest] | None = None
    produces: tuple[str, ...] = ()
    """Fields of its answer only a real write yields, named explicitly. A create needs none: every field
    of a dry-run create's answer is a placeholder already, unless it echoes the input or is `stable`."""
    description: str = ""
    signature: inspect.Signature = field(repr=False, default=inspect.Signature())
    destructive: bool = False
    """Its calls may destroy or overwrite what they touch (a delete always does): the plan marks them,
    and the review and a policy's `plan.counts.destructive` count them."""
    caution: str = ""
    """What the reviewer should know of every call of this tool that its effect does not say (an update
    that may overwrite): the message of each call the dry run only records."""
    write: Callable[..., Any] | None = field(repr=False, default=None)
    """The real write of an SDK tool (sync or async); None for an HTTP tool."""
    dry_write: Callable[..., Any] | None = field(repr=False, default=None)
    """An SDK tool's own dry run (sync or async): its answer or exception stands for the real one."""
    stable: tuple[str, ...] = ()
    """Fields of a create's answer that the real write answers alike (an echo of the input the API
    reshapes, such as a slug of the title): the dry run's value is passed on as it is."""

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(self.signature.parameters)

    @property
    def sends_http(self) -> bool:
        return self.build is not None

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
        if self.build is None:
            raise ToolDefinitionError(f"write tool {self.name!r} calls a vendor SDK; it has no HTTP request")
        request = self.build(**arguments)
        if not isinstance(request, HttpRequest):
            raise ToolDefinitionError(
                f"write tool {self.name!r} must return an HttpRequest, not {type(request).__name__}"
            )
        problem = path_problem(request.path)
        if problem is not None:
            raise ToolArgumentError(f"write tool {self.name!r}: {problem}; not recorded, not sent")
        return request

    async def __call__(self, *positional: Any, **arguments: Any) -> CallAnswer:
        runner = ACTIVE_RUN.get()
        if runner is None:
            raise NoActiveRun(self.name)
        if positional:
            try:
                bound = self.signature.bind_partial(*positional)
            except TypeError as error:
                raise ToolArgumentError(f"write tool {self.name!r}: {error}") from None
            clash = sorted(set(bound.arguments) & set(arguments))
            if clash:
                raise ToolArgumentError(f"write tool {self.name!r}: {clash[0]!r} given twice")
            arguments = {**bound.arguments, **arguments}
        declared, dropped = self.accept(arguments)
        return await runner.perform(self, declared, dropped)

    def schema(self) -> dict[str, Any]:
        """A JSON-schema tool definition for the model: only these arguments will ever be passed on."""
        hints = self.parameter_hints()
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

    def parameter_hints(self) -> dict[str, Any]:
        """The declared parameters' annotations, resolved (string annotations included)."""
        declared_by = self.build or self.write
        hints = get_type_hints(declared_by) if declared_by is not None else {}
        return {name: hints[name] for name in self.signature.parameters if name in hints}


class GatedTool(Protocol):
    """A write tool as the agent and its framework see it: a plain `async def` function whose
    signature is the declared one, so `inspect.signature`, `function_tool(tool)` and an MCP server's
    `add_tool(tool)` read the parameters and their annotations. `.spec` is its declaration."""

    spec: WriteTool
    __name__: str

    def __call__(self, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, CallAnswer]: ...


def gated(spec: WriteTool) -> GatedTool:
    """The function the agent calls for `spec`.

    A real function, not a callable object: frameworks inspect functions (the OpenAI Agents SDK refuses
    a callable object that sets its own signature), and a coroutine function is awaited by all of them.
    """

    async def call(*args: Any, **kwargs: Any) -> CallAnswer:
        return await spec(*args, **kwargs)

    source = spec.build or spec.write
    call.__name__ = call.__qualname__ = spec.name
    call.__module__ = getattr(source, "__module__", __name__)
    call.__doc__ = spec.description or None
    call.__annotations__ = {**spec.parameter_hints(), "return": CallAnswer}
    call.__signature__ = spec.signature.replace(return_annotation=CallAnswer)  # type: ignore[attr-defined]
    call.spec = spec  # type: ignore[attr-defined]
    return cast(GatedTool, call)


def spec_of(tool: GatedTool | WriteTool) -> WriteTool:
    """The declaration behind a write tool, whether given as the function or as the declaration."""
    return tool if isinstance(tool, WriteTool) else tool.spec


def _checked_signature(tool_name: str, function: Callable[..., Any]) -> inspect.Signature:
    """The signature of a write tool's function, refused when the model could steer it.

    Refused at declaration, so a mistake shows at import and not in production: `*args`/`**kwargs`
    (the schema must be explicit for arguments to be filtered), and a parameter named like the dry-run
    flag (the model must never steer it).
    """
    try:
        # Annotations resolved, so frameworks that read the signature see types, not strings.
        signature = inspect.signature(function, eval_str=True)
    except NameError:
        signature = inspect.signature(function)
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
    return signature.replace(return_annotation=inspect.Signature.empty)


def _check_effect(effect: str) -> None:
    if effect not in WRITE_EFFECTS:
        raise ToolDefinitionError(
            f"effect {effect!r} is not a write; use one of {', '.join(WRITE_EFFECTS)} "
            "(read tools stay ordinary functions)"
        )


def write_tool(
    *,
    effect: Effect,
    produces: tuple[str, ...] = (),
    stable: tuple[str, ...] = (),
    name: str | None = None,
) -> Callable[[Callable[..., HttpRequest]], GatedTool]:
    """Declare an HTTP write tool: `effect` says what it does. The decorated function builds the
    request; the returned tool never sends it itself.

    In a dry run every field a create answers is a placeholder (`<id from call 1>`) unless it echoes
    the call's input or is named in `stable`; `produces` names fields of any write that only a real
    write yields (an update's new version), to be explicit.

    A `read` effect is refused (read tools are not wrapped), and so is a signature the model could
    steer (see `_checked_signature`).
    """
    _check_effect(effect)

    def declare(build: Callable[..., HttpRequest]) -> GatedTool:
        tool_name = name or build.__name__
        return gated(
            WriteTool(
                name=tool_name,
                effect=effect,
                build=build,
                produces=tuple(produces),
                stable=tuple(stable),
                description=inspect.getdoc(build) or "",
                signature=_checked_signature(tool_name, build),
            )
        )

    return declare


def sdk_tool(
    *,
    effect: Effect,
    produces: tuple[str, ...] = (),
    stable: tuple[str, ...] = (),
    dry_run: Callable[..., Any] | None = None,
    name: str | None = None,
) -> Callable[[Callable[..., Any]], GatedTool]:
    """Declare a write tool built on a vendor SDK rather than raw HTTP (stripe, boto3, a cloud client).

    The decorated function makes the real write and returns the SDK's answer (a mapping, or an object
    with `to_dict()`/`model_dump()`). Outside an approved real run it is never called. In a dry run the
    call is answered by `dry_run`, when given, with the same arguments: the SDK's own check (boto3's
    `DryRun=True`, Google Ads' `validate_only`), whose exception is the refusal; without one, or under
    the `record` backend, the call is only recorded and the reviewer sees it as not validated.
    """
    _check_effect(effect)

    def declare(write: Callable[..., Any]) -> GatedTool:
        tool_name = name or write.__name__
        signature = _checked_signature(tool_name, write)
        parameters = tuple(signature.parameters)
        if dry_run is not None and tuple(inspect.signature(dry_run).parameters) != parameters:
            raise ToolDefinitionError(
                f"write tool {tool_name!r}: its dry_run callable must take the same parameters "
                f"({', '.join(signature.parameters)}), so it checks exactly the call it stands for"
            )
        return gated(
            WriteTool(
                name=tool_name,
                effect=effect,
                produces=tuple(produces),
                stable=tuple(stable),
                description=inspect.getdoc(write) or "",
                signature=signature,
                write=write,
                dry_write=dry_run,
            )
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


async def call_maybe_async(function: Callable[..., Any], arguments: Mapping[str, Any]) -> Any:
    """Call a vendor SDK function, sync or async, with keyword arguments; await what needs awaiting."""
    result = function(**arguments)
    return await result if inspect.isawaitable(result) else result


def plain_result(result: Any) -> Any:
    """An SDK's answer as JSON-like data: a pydantic model, an object with `to_dict()`, or as it is."""
    for method in ("model_dump", "to_dict"):
        convert = getattr(result, method, None)
        if callable(convert):
            return convert()
    return result
