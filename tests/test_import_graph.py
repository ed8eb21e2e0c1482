"""The imports of `reviewer` draw no circle: each module can be read, and loaded, after the ones it
uses. An import inside a function counts too: it is a dependency all the same, only a later one."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

import reviewer


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one that imports itself
    (Tarjan's algorithm, iterative): each is at least one import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, pending = work[-1]
            for target in pending:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(imports.get(target, set())))))
                    break
                if target in on_stack:
                    low[module] = min(low[module], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1 or module in imports.get(module, set()):
                        found.append(sorted(component))
    return found


def reviewer_imports() -> dict[str, set[str]]:
    graph = grimp.build_graph("reviewer")
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def test_the_import_graph_of_reviewer_has_no_cycle() -> None:
    assert cycles(reviewer_imports()) == []


def test_the_cycle_finder_sees_a_circle_through_three_modules_and_none_in_a_chain() -> None:
    """The test above would pass on a finder that finds nothing."""
    circle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(circle) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"a"}}) == [["a"]]


def test_the_graph_holds_imports_made_inside_functions() -> None:
    """`reviewer mcp-gate` imports its server only when it runs: the graph still has that edge."""
    assert "reviewer.mcp_gate.server" in reviewer_imports()["reviewer.mcp_gate.command"]


def private_reaches(root: Path) -> list[str]:
    """Each import from another top-level package of a private name (`_name`) or of a private module
    (`reviewer.signing._ssh_agent`): the inside of a package, reached from outside it."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("reviewer."):
                continue
            target = node.module or ""
            if target.split(".")[:2] == module.split(".")[:2]:
                continue
            if any(part.startswith("_") for part in target.split(".")):
                found.append(f"{module} -> {target}")
            found += [
                f"{module} -> {target}.{alias.name}" for alias in node.names if alias.name.startswith("_")
            ]
    return found


def test_no_package_reaches_another_packages_private_names() -> None:
    assert private_reaches(Path(reviewer.__file__).parent) == []


def test_the_private_name_finder_sees_a_reach_across_packages(tmp_path: Path) -> None:
    """The test above would pass on a finder that finds nothing."""
    package = tmp_path / "reviewer"
    (package / "tui").mkdir(parents=True)
    (package / "tui" / "app.py").write_text(
        "from reviewer.signing._ssh_agent import agent\nfrom reviewer.plan.hosts import _address\n"
        "from reviewer.tui._own import fine\n"
    )
    assert private_reaches(package) == [
        "reviewer.tui.app -> reviewer.signing._ssh_agent",
        "reviewer.tui.app -> reviewer.plan.hosts._address",
    ]
