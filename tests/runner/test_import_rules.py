"""Import rules of docs/architecture.md checked on the source (every import statement,
also those inside functions and under TYPE_CHECKING): no import cycle inside runner/,
and the layers' forbidden imports."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "runner"


def _graph() -> dict[str, set[str]]:
    mods = {}
    for p in ROOT.rglob("*.py"):
        name = ".".join(p.relative_to(ROOT.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = p

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(p.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in node.names]
            for n in names:
                t = resolve(n)
                if t and t != m:
                    graph[m].add(t)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (list of modules, first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_no_import_cycle_in_runner():
    assert _cycle(_graph()) is None


def test_layers_keep_their_imports():
    graph = _graph()
    rules = {"runner.report": ("runner.load", "runner.backends", "runner.store", "runner.load.registry",
                               "runner.catalogue.workloads", "runner.campaign.loop", "runner.cell.outcome"),
             "runner.load.registry": ("runner.store", "runner.campaign.loop", "runner.cell.outcome", "runner.multihost", "runner.report"),
             "runner.load": ("runner.store", "runner.campaign.loop", "runner.cell.outcome", "runner.multihost", "runner.report"),
             "runner.catalogue.workloads": ("runner.",),
             "runner.store": ("runner.campaign.loop", "runner.cell.outcome", "runner.multihost")}
    bad = []
    for layer, forbidden in rules.items():
        for m, targets in graph.items():
            if m == layer or m.startswith(layer + "."):
                bad += [f"{m} -> {t}" for t in targets if t.startswith(forbidden) and t != m]
    assert bad == []
