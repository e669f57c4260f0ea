"""The layout reads as the pipeline: no import cycles, arrows point one way, small modules.

The import graph is built from the source (every ``import`` statement, also inside
functions, except ``if TYPE_CHECKING:`` blocks), so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "roofline"
CORE = {
    "roofline.errors", "roofline.units", "roofline.profile", "roofline.evaluate", "roofline.costs",
    "roofline.memory", "roofline.advice", "roofline.provenance", "roofline.prediction", "roofline.grid",
    "roofline.result", "roofline.profile_curve", "roofline.profile_moe", "roofline.profile_attention",
    "roofline.pipeline", "roofline.bound_split",
    "roofline.latency",
}  # fmt: skip
#: Presentation hooks on the core result that Jupyter and users call (``_repr_html_``,
#: ``plot_roofline``): they import the renderer when called; nothing in report/ is needed to predict.
#: ``PredictionResult.interval`` imports the uncertainty model (derived from published rows) when called.
PRESENTATION_HOOKS = {
    ("roofline.result", "roofline.report.charts"),
    ("roofline.result", "roofline.report.notebook"),
    ("roofline.result", "roofline.published.uncertainty"),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names}
            out.update(subs & modules)  # ``from pkg import submodule`` depends on the submodule only
            if not subs <= modules:
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = {d for d in _imports(path, set(modules)) if d in modules and d != name and d != "roofline"}
        graph[name] = {d for d in deps if (name, d) not in PRESENTATION_HOOKS}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_among_roofline_modules() -> None:
    assert _cycles(_graph()) == []


def test_core_imports_nothing_from_cli_report_serving_or_published() -> None:
    graph = _graph()
    for mod in sorted(CORE):
        bad = sorted(d for d in graph[mod] if d.split(".")[1] in ("cli", "report", "serving", "published"))
        assert bad == [], f"{mod} imports {bad}"


def test_top_level_holds_only_the_core() -> None:
    top = {f"roofline.{p.stem}" for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert top == CORE


def test_readme_main_command_writes_no_tracked_file() -> None:
    """The newcomer's main command writes its report under a git-ignored folder, so running it never
    rewrites the committed example report (reports/ is regenerated on purpose, see reports/README.md)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    main = next(line for line in readme.splitlines() if "roofline report" in line and "pip install ." in line)
    out = re.search(r"-o (\S+)", main)
    assert out is not None
    ignored = [g.strip().strip("/") for g in (ROOT / ".gitignore").read_text().splitlines() if g.strip()]
    assert out.group(1).split("/")[0] in ignored, out.group(1)


def test_no_module_over_400_lines() -> None:
    """Small modules, one concern each: none of the package's modules passes 400 lines."""
    long = {
        str(p.relative_to(ROOT)): n
        for d in (PKG, ROOT / "calibrate")
        for p in d.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert long == {}, long


def _sources() -> list[Path]:
    return [p for d in (PKG, ROOT / "calibrate") for p in sorted(d.rglob("*.py"))]


def test_no_function_over_80_lines() -> None:
    """Functions (methods and nested functions included) stay under 80 lines, signature and docstring counted."""
    long = {
        f"{p.relative_to(ROOT)}:{n.lineno} {n.name}": n.end_lineno - n.lineno + 1
        for p in _sources()
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and (n.end_lineno or 0) - n.lineno + 1 > 80
    }
    assert long == {}, long


def test_no_private_name_imported_across_modules() -> None:
    """A name with a leading underscore belongs to its module: nothing imports it from another one."""
    bad = [
        f"{p.relative_to(ROOT)}:{n.lineno} {n.module}.{a.name}"
        for p in _sources()
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith(("roofline", "calibrate"))
        for a in n.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]
    assert bad == [], bad


def test_serving_layers_point_one_way() -> None:
    """serving/ reads as its pipeline: workload/ (what is served) imports nothing else of serving/; the engine
    simulation in sim/ never imports the planner or the front door (its speculative and disaggregated variants
    may build replicas with serving/replica.py); nothing below plan/ imports plan/ except the front door, which
    asks the screening tier for a saturated run's sustainable rate."""
    graph = _graph()
    serving = {m for m in graph if m.startswith("roofline.serving.")}
    variants = {"roofline.serving.sim.speculative", "roofline.serving.sim.disagg"}
    for mod in sorted(serving):
        deps = {d for d in graph[mod] if d.startswith("roofline.serving.")}
        if mod.startswith("roofline.serving.workload."):
            assert all(d.startswith("roofline.serving.workload.") for d in deps), (mod, deps)
        if mod.startswith("roofline.serving.sim."):
            allowed = ("roofline.serving.sim.", "roofline.serving.workload.")
            extra = {"roofline.serving.replica"} if mod in variants else set()
            assert all(d.startswith(allowed) or d in extra for d in deps), (mod, deps)
        if not mod.startswith("roofline.serving.plan.") and mod != "roofline.serving.simulate":
            assert not any(d.startswith("roofline.serving.plan.") for d in deps), (mod, deps)


def test_fmt_skip_only_on_tables() -> None:
    """``# fmt: skip`` keeps hand-aligned tables aligned; everything else is as ruff formats it (at most 60 in the
    tree: module-level tables of constants, options and cases)."""
    files = [
        p for d in ("roofline", "calibrate", "tests", "benchmarks", "validation") for p in (ROOT / d).rglob("*.py")
    ]
    n = sum(p.read_text(encoding="utf-8").count("# fmt: skip") for p in files)
    assert n <= 60, n
