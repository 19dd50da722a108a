"""vdlib.utils.bytecode: the workers' imports compiled ahead, in a background process."""

from __future__ import annotations

import sys

from vdlib.utils import bytecode


def test_warm_bytecode_writes_the_caches_of_the_named_modules(tmp_path, monkeypatch):
    (tmp_path / "warm_me.py").write_text("X = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("VDLIB_WARM_BYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    proc = bytecode.warm_bytecode(["warm_me", "no_such_module_here"])
    assert proc is not None and proc.wait(timeout=60) == 0  # a missing module is skipped
    assert list((tmp_path / "__pycache__").glob("warm_me.*.pyc"))
    assert bytecode.warm_bytecode(["warm_me"]) is None  # cached now: nothing to do


def test_warm_bytecode_does_nothing_where_no_caches_are_written(monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert bytecode.warm_bytecode(["json"]) is None
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    monkeypatch.setenv("VDLIB_WARM_BYTECODE", "0")
    assert bytecode.warm_bytecode(["json"]) is None
    assert bytecode.warm_bytecode([]) is None
