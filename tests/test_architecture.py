"""The package's shape (docs/architecture.md): no import circle, no module over 500 lines, no
private name imported across modules, run paths formatted by ``vdlib.config.layout`` only, and no
notebook code cell repeated in another notebook."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "vdlib"
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(imported vdlib module, names) for every import in the file, function-level included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
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
                subs = [n for n in names if f"{mod}.{n}" in MODULES]
                out += [(f"{mod}.{n}", []) for n in subs]
                out.append((mod, [n for n in names if n not in subs]))
    return [(m, n) for m, n in out if m in MODULES]


def _graph() -> dict[str, set[str]]:
    return {name: {m for m, _ in _imports(name, path) if m != name}
            for name, path in MODULES.items()}


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
