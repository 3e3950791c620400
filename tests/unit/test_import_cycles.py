"""No import cycles in the product (dm_core, plugins, dags, spark_jobs), counting imports
inside functions: a lazy import still ties two modules together, it only hides the knot
until some caller runs that function first.

The graph is read with ``ast`` (nothing is imported). Module names are those Python sees
at run time: dm_core and spark_jobs from the project root, plugins and dags from their own
folders (Airflow puts them on sys.path). An edge is an import of a product module;
``from package import name`` is an edge to the submodule when ``name`` is one. Importing a
module also runs its parent packages' ``__init__``, but that edge is not counted: every
package whose ``__init__`` imports a submodule would otherwise count as a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# folder → the import path of its modules (relative to it)
PRODUCT = {ROOT / "dm_core": "dm_core", ROOT / "spark_jobs": "spark_jobs", ROOT / "plugins": "", ROOT / "dags": ""}
MAX_LISTED = 50


def product_modules() -> dict[str, Path]:
    out = {}
    for folder, prefix in PRODUCT.items():
        for f in sorted(folder.rglob("*.py")):
            parts = [*filter(None, prefix.split(".")), *f.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                out[".".join(parts)] = f
    return out


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The product module ``import name`` loads last (``a.b.c`` → ``a.b`` if ``c`` is an attribute)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Product modules ``module`` imports anywhere in its file (top level, functions, TYPE_CHECKING)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    deps = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            deps.update(_owner(a.name, modules) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module
            for a in node.names:
                sub = f"{source}.{a.name}"
                deps.add(sub if sub in modules else _owner(source, modules))
    deps.discard(None)
    deps.discard(module)
    return deps


def import_graph() -> dict[str, set[str]]:
    modules = product_modules()
    return {m: imports_of(m, f, modules) for m, f in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def cycles(graph: dict[str, set[str]], limit: int = MAX_LISTED) -> list[list[str]]:
    """Every elementary cycle (up to ``limit``), each starting at its smallest module."""
    out = []
    for comp in strongly_connected(graph):
        members = set(comp)
        for start in comp:
            # only modules after ``start`` may appear, so each cycle is found once
            allowed = {m for m in members if m > start}
            path = [start]
            todo = [iter(sorted(graph[start] & (allowed | {start})))]
            while todo:
                for w in todo[-1]:
                    if w == start:
                        out.append(path + [start])
                        if len(out) >= limit:
                            return out
                    elif w not in path:
                        path.append(w)
                        todo.append(iter(sorted(graph[w] & (allowed | {start}))))
                        break
                else:
                    todo.pop()
                    path.pop()
    return out


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert "dm_core.cli.dmctl" in graph and "shardflow_airflow.sensors" in graph and "shardflow_dags" in graph
    assert "dm_core.reset" in graph["dm_core.cli.lifecycle"]          # an import inside a function
    assert "dm_core.faults" in graph["dm_core.full.loader"]             # ``from dm_core import faults``
    assert "shardflow_airflow.factory" in graph["shardflow_dags"]


def test_cycle_finder_on_a_small_graph():
    g = {"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(g) == [["a", "b", "c"]]
    assert cycles(g) == [["a", "b", "a"], ["a", "b", "c", "a"]]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (a lazy import counts too):\n" + "\n".join(" -> ".join(c) for c in found)
