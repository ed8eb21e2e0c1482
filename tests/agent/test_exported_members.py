"""`reviewer.agent` declares its public surface: `__all__` is sorted, complete, and enough to type a call."""

from __future__ import annotations

import inspect
import typing
from types import ModuleType
from typing import Any

import reviewer.agent


def test_all_is_sorted() -> None:
    assert reviewer.agent.__all__ == sorted(reviewer.agent.__all__)


def test_every_public_name_is_exported_and_every_export_exists() -> None:
    """A name imported into the package is in `__all__`, and `__all__` names nothing the package lacks."""
    public = sorted(
        name
        for name, value in vars(reviewer.agent).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    )
    assert public == reviewer.agent.__all__


def _reviewer_types(annotation: Any) -> set[type]:
    """The classes of `reviewer` an annotation names, inside unions and generics too."""
    if typing.get_origin(annotation) is not None:
        return set().union(*(_reviewer_types(argument) for argument in typing.get_args(annotation)))
    if isinstance(annotation, type) and annotation.__module__.startswith("reviewer."):
        return {annotation}
    return set()


def _public_callables() -> dict[str, Any]:
    """Every function and class the agent library defines: the constructor, methods and properties.

    The types it re-exports from the parts below are theirs to declare; their own methods are left out.
    """
    found: dict[str, Any] = {}
    for name in reviewer.agent.__all__:
        exported = getattr(reviewer.agent, name)
        if not getattr(exported, "__module__", "").startswith("reviewer.agent."):
            continue
        if inspect.isclass(exported):
            for attribute, member in vars(exported).items():
                if attribute.startswith("_") and attribute != "__init__":
                    continue
                function = (
                    member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                )
                if inspect.isfunction(function):
                    found[f"{name}.{attribute}"] = function
        elif inspect.isfunction(exported):
            found[name] = exported
    return found


def test_every_type_a_public_signature_names_is_exported() -> None:
    """`Gate(queue=QueueClient(...), allowed_signers=AllowedSigners.parse(...))` imports from one place."""
    exported = {id(getattr(reviewer.agent, name)) for name in reviewer.agent.__all__}
    callables = _public_callables()
    assert "Gate.__init__" in callables and "QueueAgent.__init__" in callables
    missing = {
        f"{where}: {kind.__module__}.{kind.__qualname__}"
        for where, function in callables.items()
        for annotation in typing.get_type_hints(function, localns=vars(reviewer.agent)).values()
        for kind in _reviewer_types(annotation)
        if id(kind) not in exported
    }
    assert missing == set()


def test_a_runs_beginning_and_end_are_public_members() -> None:
    """`reviewer run` and the plan session begin and end a recording themselves: the methods they
    call are on the public surface, documented, not reached for under a private name."""
    members = _public_callables()
    for name in ("Recording.start", "Recording.finish", "Execution.start", "Execution.finish"):
        assert members[name].__doc__, name
