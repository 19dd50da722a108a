"""The package's shape (docs/architecture.md): folders in layers (a module imports its own
folder and lower layers only; ``vdlib/method`` nothing else of vdlib but the helper processes
of ``vdlib/utils``), no import circle, no
module over 500 lines, no private name imported across modules, run paths formatted by
``vdlib.config.layout`` only, and no notebook code cell repeated in another notebook."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "vdlib"
MAX_LINES = 500

# vdlib's folders, lowest layer first. A module may import modules of its own folder and of
# the folders of lower layers, never of its own layer's other folder or of a higher layer.
# config sits below engines: model names are config's data (vdlib/config/model_names.py), the
# engines register a loader for each, so validating a config imports nothing of the engines.
LAYERS: list[tuple[str, ...]] = [
    ("utils",),                 # infrastructure that knows nothing of the method
    ("method",),                # the paper's math (of vdlib, it imports utils' helper processes)
    ("config",),                # the typed config, model names, the arms' table, every run path
    ("engines",),               # model loading, transformers / vLLM / server engines
    # diversity metrics; benchmark evaluation and verification; the run folder's bookkeeping
    # (fingerprint, lock, stage records, manifest, start)
    ("metrics", "evaluation", "runs"),
    ("loop", "report"),         # one co-evolution run; beside it, what reads runs and draws
    ("grid", "export"),         # many runs and their status; a run shared as a dataset
    ("experiments",),           # the notebooks' verbs: run a grid, evaluate, transfer
    ("app",),                   # the command line and the notebooks' batch runner
]
# report reads artifacts and draws: on loop's floor, it imports nothing of loop/ or grid/ (nor
# loop of it); the verbs that run grids, evaluations and transfers sit above both.
# the only modules at vdlib's top level: no group, nothing imports them
TOP_LEVEL = {"vdlib", "vdlib.__main__"}
# what vdlib/method may import besides the standard library
METHOD_THIRD_PARTY = {"torch", "numpy", "scipy", "transformers", "math_verify"}
# what vdlib/method may import of vdlib besides itself: the helper processes grading runs in
METHOD_VDLIB = {"vdlib.utils.helper_process"}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in sorted((root / "vdlib").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (annotations only, no run-time import)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                getattr(node.test, "id", None) == "TYPE_CHECKING"
                or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            for child in node.body:
                out.update(id(n) for n in ast.walk(child))
    return out


def _imports(name: str, path: Path, modules: dict[str, Path] | None = None, *,
             runtime_only: bool = False) -> list[tuple[str, list[str]]]:
    """(imported vdlib module, names) for every import in the file, function-level included
    (``runtime_only``: not those under ``if TYPE_CHECKING:``)."""
    modules = MODULES if modules is None else modules
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree) if runtime_only else set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("vdlib")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("vdlib"):
                names = [a.name for a in node.names]
                # ``from vdlib.pkg import module`` imports the submodule
                subs = [n for n in names if f"{mod}.{n}" in modules]
                out += [(f"{mod}.{n}", []) for n in subs]
                out.append((mod, [n for n in names if n not in subs]))
    return [(m, n) for m, n in out if m in modules]


def _graph(modules: dict[str, Path] | None = None, *,
           runtime_only: bool = False) -> dict[str, set[str]]:
    modules = MODULES if modules is None else modules
    return {name: {m for m, _ in _imports(name, path, modules, runtime_only=runtime_only)
                   if m != name}
            for name, path in modules.items()}


def _group(module: str) -> str | None:
    """The folder of ``vdlib.<folder>.<module>`` (``vdlib.<folder>`` itself included)."""
    parts = module.split(".")
    return None if module in TOP_LEVEL else parts[1]


def _upward(graph: dict[str, set[str]],
            layers: list[tuple[str, ...]] = LAYERS) -> list[str]:
    """Every import of a module of another folder that is not in a lower layer."""
    rank = {g: i for i, folders in enumerate(layers) for g in folders}
    found = []
    for name in sorted(graph):
        a = _group(name)
        for dep in sorted(graph[name]):
            b = _group(dep)
            if a is None or b is None or a == b:
                continue
            if rank[b] >= rank[a]:
                found.append(f"{name} ({a}) imports {dep} ({b})")
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            # a package importing its own submodules (re-exports) is not a circle
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_graph_has_no_circle():
    assert _cycle(_graph()) is None, f"import circle: {' -> '.join(_cycle(_graph()) or [])}"


def test_the_circle_check_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_vdlib_holds_only_folders_of_the_layers_and_its_init_and_main():
    rank = {g for folders in LAYERS for g in folders}
    strays = [name for name in MODULES if name not in TOP_LEVEL and _group(name) not in rank]
    assert not strays, f"modules outside the layers' folders: {strays}"
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]


def test_no_folder_imports_a_higher_layer():
    upward = _upward(_graph(runtime_only=True))
    assert not upward, "imports against the layers (LAYERS):\n" + "\n".join(upward)


def test_report_imports_nothing_of_the_loop_or_the_grid_and_the_verbs_sit_above_both():
    """Issue 52: report/ reads artifacts and draws; running a grid, an evaluation or a transfer
    is vdlib/experiments/, above loop/ and grid/."""
    graph = {"vdlib.report.experiments": {"vdlib.loop.model_store", "vdlib.grid.launch"},
             "vdlib.loop.stages": {"vdlib.report.tables"},
             "vdlib.experiments.grids": {"vdlib.report.experiments", "vdlib.grid.launch",
                                         "vdlib.loop.coevolution"},
             "vdlib.grid.launch": {"vdlib.experiments.grids"},
             "vdlib.loop.model_store": set(), "vdlib.loop.coevolution": set(),
             "vdlib.report.tables": set()}
    assert _upward(graph) == [
        "vdlib.grid.launch (grid) imports vdlib.experiments.grids (experiments)",
        "vdlib.loop.stages (loop) imports vdlib.report.tables (report)",
        "vdlib.report.experiments (report) imports vdlib.grid.launch (grid)",
        "vdlib.report.experiments (report) imports vdlib.loop.model_store (loop)"]


def test_the_layer_check_finds_a_planted_upward_import(tmp_path):
    # a synthetic graph: the method importing the loop, config importing the engines (while
    # the engines importing config is allowed), and a same-layer import between metrics and
    # evaluation
    graph = {"vdlib.method.rewards": {"vdlib.method.bleu", "vdlib.loop.stages"},
             "vdlib.config.experiment": {"vdlib.engines.models"},
             "vdlib.engines.setting": {"vdlib.config.experiment"},
             "vdlib.metrics.nli": {"vdlib.evaluation.runner"},
             "vdlib.loop.stages": {"vdlib.method.rewards", "vdlib.metrics.nli"},
             "vdlib.method.bleu": set(), "vdlib.engines.models": set(),
             "vdlib.evaluation.runner": set()}
    assert _upward(graph) == [
        "vdlib.config.experiment (config) imports vdlib.engines.models (engines)",
        "vdlib.method.rewards (method) imports vdlib.loop.stages (loop)",
        "vdlib.metrics.nli (metrics) imports vdlib.evaluation.runner (evaluation)"]
    # the same check over files: a copy of vdlib/method with one module importing the loop,
    # deferred inside a function; an import under ``if TYPE_CHECKING:`` does not count
    for folder in ("method", "loop"):
        (tmp_path / "vdlib" / folder).mkdir(parents=True)
        (tmp_path / "vdlib" / folder / "__init__.py").write_text("")
    (tmp_path / "vdlib" / "__init__.py").write_text("")
    (tmp_path / "vdlib" / "loop" / "stages.py").write_text("from vdlib.method import grpo\n")
    (tmp_path / "vdlib" / "method" / "grpo.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from vdlib.loop.stages import Stage\n")
    modules = _modules(tmp_path)
    assert _upward(_graph(modules, runtime_only=True)) == []
    (tmp_path / "vdlib" / "method" / "rewards.py").write_text(
        "def reward():\n    from vdlib.loop import stages\n    return stages\n")
    modules = _modules(tmp_path)
    assert _upward(_graph(modules, runtime_only=True)) == [
        "vdlib.method.rewards (method) imports vdlib.loop (loop)",  # the package's __init__
        "vdlib.method.rewards (method) imports vdlib.loop.stages (loop)"]


def test_the_method_imports_only_the_standard_library_and_its_few_packages():
    found = []
    for name, path in MODULES.items():
        if _group(name) != "method":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            tops = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                    else [])
            for top in (t.split(".")[0] for t in tops):
                if top not in sys.stdlib_module_names and top not in METHOD_THIRD_PARTY \
                        and not (top == "vdlib" and (_group(_mod_of(node)) == "method"
                                                     or _mod_of(node) in METHOD_VDLIB)):
                    found.append(f"{path.relative_to(ROOT)}: import {top}")
    assert not found, "\n".join(found)


def _mod_of(node: ast.AST) -> str:
    return getattr(node, "module", None) or node.names[0].name  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_500_lines(name):
    n = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)} has {n} lines (max {MAX_LINES})"


def test_no_private_name_crosses_a_module_line():
    crossing = [f"{MODULES[name].relative_to(ROOT)}: from {mod} import {n}"
                for name, path in MODULES.items() for mod, names in _imports(name, path)
                if mod != name for n in names if n.startswith("_") and not n.startswith("__")]
    assert not crossing, "\n".join(crossing)


# A run path written as a literal: ``iter_<t>`` folders, ``<arm>-seed<seed>`` run ids, the
# ``reports`` folder of an experiment. Only vdlib/config/layout.py may hold these.
_RUN_PATH = re.compile(r"""iter_\{|["']iter_|seed\{|["']reports["']|-seed\(""")


def test_run_paths_are_formatted_by_the_layout_module_only():
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for name, path in MODULES.items() if name != "vdlib.config.layout"
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _RUN_PATH.search(line) and not line.lstrip().startswith("#")
             and not _in_docstring(path, i)]
    assert not found, "\n".join(found)


def _in_docstring(path: Path, lineno: int, _cache: dict = {}) -> bool:  # noqa: B006
    if path not in _cache:
        lines: set[int] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        _cache[path] = lines
    return lineno in _cache[path]


def _code_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [("".join(c["source"]) if isinstance(c["source"], list) else c["source"]).strip()
            for c in cells if c["cell_type"] == "code"
            and "parameters" not in c.get("metadata", {}).get("tags", [])]


def test_no_notebook_code_cell_is_repeated_in_another_notebook():
    seen: dict[str, str] = {}
    repeated = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in _code_cells(nb):
            if cell and cell in seen and seen[cell] != nb.name:
                repeated.append(f"{nb.name} repeats a cell of {seen[cell]}:\n{cell[:200]}")
            seen.setdefault(cell, nb.name)
    assert not repeated, "\n\n".join(repeated)


def _config_reads(source: str, sections: set[str]) -> list[str]:
    """Where ``source`` reads a run's config by its shape: a name ``cfg`` or a config section's
    name (``vocab_dropout``, ``proposer``, ...) as a variable or an argument, or an attribute
    ``.<section>`` (``x.vocab_dropout.alpha``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        name = (node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg)
                else None)
        if name is not None and (name == "cfg" or name in sections):
            found.append(f"{node.lineno}: name {name}")
        if isinstance(node, ast.Attribute) and node.attr in sections:
            found.append(f"{node.lineno}: .{node.attr}")
    return sorted(found, key=lambda hit: (int(hit.split(":")[0]), hit))


def _config_sections() -> set[str]:
    """The names of the config's sections, but ``model`` (in the method, the network itself)."""
    import dataclasses

    from vdlib.config import ExperimentConfig

    return {f.name for f in dataclasses.fields(ExperimentConfig)
            if isinstance(f.type, str) and f.type.endswith("Config")} - {"model"}


def test_the_method_takes_values_not_a_config():
    """Issue 52: vdlib/method's functions take the values they need; the conversion from a
    config (``vdlib.config.mask_settings``) lives in config, so no function of the method
    depends on the config's shape (which the import layers cannot see)."""
    sections = _config_sections()
    assert {"vocab_dropout", "proposer", "solver", "curriculum", "metrics"} <= sections
    found = [f"{path.relative_to(ROOT)}:{hit}" for name, path in MODULES.items()
             if _group(name) == "method"
             for hit in _config_reads(path.read_text(encoding="utf-8"), sections)]
    assert not found, "the method reads a config:\n" + "\n".join(found)


def test_the_config_read_check_finds_planted_reads():
    planted = ("def alpha(cfg, t):\n    return cfg.vocab_dropout.alpha\n"
               "def start(vocab_dropout):\n    return vocab_dropout.adaptive\n"
               "def width(run):\n    return run.settings.vocab_dropout.width\n"
               "def fine(schedule, config):\n    return schedule.alpha, config.vocab_size\n")
    assert _config_reads(planted, {"vocab_dropout", "proposer"}) == [
        "1: name cfg", "2: .vocab_dropout", "2: name cfg", "3: name vocab_dropout",
        "4: name vocab_dropout", "6: .vocab_dropout"]
