"""No import cycles inside a layer: within each layer of flask_eval (its top-level packages,
``core`` to ``cli``), no module imports, directly or through others of the layer, a module
that imports it back. ``lint-imports`` keeps the layers themselves in order (each imports
only those below it); this keeps each layer's own modules in order.

Every import that Python may run counts, wherever it stands: at module level, inside a
function (a lazy import), or under ``if TYPE_CHECKING:`` (what a module names in its
annotations, it depends on). The import graph is grimp's, the library import-linter
builds its graph with.

Prints each cycle as a chain of modules, each import with its line
(``a:12 -> b:30 -> a``), and exits 1 if there is any. ``scripts/lint`` runs it;
``tests/test_check_cycles.py`` tests it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent

#: module -> the modules of its layer it imports
Edges = Mapping[str, frozenset[str]]


def layers(graph: grimp.ImportGraph, root: str) -> list[str]:
    """The top-level packages of ``root`` (its layers), sorted."""
    return sorted(m for m in graph.find_children(root) if graph.find_children(m))


def layer_edges(graph: grimp.ImportGraph, layer: str) -> dict[str, frozenset[str]]:
    """The imports among the modules of ``layer`` (the package itself included)."""
    modules = {layer, *graph.find_descendants(layer)}
    return {
        m: frozenset(i for i in graph.find_modules_directly_imported_by(m) if i in modules)
        for m in sorted(modules)
    }


def components(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted, in order of their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            pushed = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, ())))))
                    pushed = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if pushed:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def shortest_cycle(edges: Edges, start: str, within: set[str]) -> list[str]:
    """The shortest chain ``start -> ... -> start`` through modules of ``within``."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(edges[node]):
            if target not in within:
                continue
            if target == start:
                chain = [node]
                while chain[-1] != start:
                    chain.append(came_from[chain[-1]])
                return [*reversed(chain), start]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise ValueError(f"{start} is on no cycle")  # a component's module always is


def chains(edges: Edges, component: Sequence[str]) -> list[list[str]]:
    """Cycles that together pass through every module of ``component``: the shortest
    through its first module, then through the first one not yet on any, and so on."""
    within, covered, found = set(component), set[str](), []
    for module in component:
        if module not in covered:
            chain = shortest_cycle(edges, module, within)
            covered.update(chain)
            found.append(chain)
    return found


def render(graph: grimp.ImportGraph, chain: Sequence[str]) -> str:
    """``a:12 -> b:30 -> a``: each module with the line of its import of the next."""
    parts = []
    for importer, imported in itertools.pairwise(chain):
        details = graph.get_import_details(importer=importer, imported=imported)
        lines = ",".join(str(n) for n in sorted({d["line_number"] for d in details}))
        parts.append(f"{importer}:{lines}" if lines else importer)
    return " -> ".join([*parts, chain[-1]])


def find(root: str) -> list[tuple[str, list[str]]]:
    """Each cycle inside a layer of ``root``: its layer and its chains, rendered."""
    graph = grimp.build_graph(
        root,
        include_external_packages=False,
        exclude_type_checking_imports=False,  # strict: an annotation's import counts
        cache_dir=None,
    )
    found = []
    for layer in layers(graph, root):
        edges = layer_edges(graph, layer)
        for component in components(edges):
            found.append((layer, [render(graph, c) for c in chains(edges, component)]))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="No import cycles inside a layer.")
    parser.add_argument("root", nargs="?", default="flask_eval", help="the root package")
    root = parser.parse_args(argv).root
    sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one
    found = find(root)
    for layer, rendered in found:
        print(f"import cycle in {layer}:")
        for chain in rendered:
            print(f"  {chain}")
    if found:
        print(f"{len(found)} import cycle(s) inside the layers of {root}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
