"""One repository script (``benchmarks/...``, ``tools/lent-gpus/...``) loaded as a module,
for the tests that call its
functions: ``load_script("tools/lent-gpus/gpu_small.py")``. The tests folder is on ``sys.path``
under pytest's default import mode, so a test imports this as ``from _script_loader import
load_script``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(rel: str, name: str | None = None) -> ModuleType:
    """The script at ``ROOT / rel`` executed as module ``name`` (default: its file stem),
    registered in ``sys.modules`` so that a dataclass in it can look its module up."""
    path = ROOT / rel
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
