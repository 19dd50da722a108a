"""environment.yml and the ``gpu`` extra admit only vLLM versions that ran (issue 53): the
versions of docs/vllm.md's table of runs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _table_versions(text: str) -> list[str]:
    """The vLLM versions of the table under "The table of runs" (its first column)."""
    part = text[text.index("**The table of runs.**"):]
    rows = [line for line in part.splitlines()[1:] if line.startswith("| ")]
    rows = rows[:next((i for i, r in enumerate(rows) if not r.startswith("|")), len(rows))]
    return [v for r in rows if re.fullmatch(r"\d+\.\d+\.\d+", v := r.split("|")[1].strip())]


def test_the_table_names_versions():
    assert _table_versions((ROOT / "docs" / "vllm.md").read_text(encoding="utf-8")) == [
        "0.25.1", "0.33.0"]
    assert _table_versions("**The table of runs.**\n\n| vLLM | x |\n|---|---|\n| 1.2.3 | y |\n"
                           "| 0.9.0 | z |\n") == ["1.2.3", "0.9.0"]


def test_pins_admit_only_versions_that_ran():
    ran = _table_versions((ROOT / "docs" / "vllm.md").read_text(encoding="utf-8"))
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = [Requirement(r) for r in extra["project"]["optional-dependencies"]["gpu"]]
    vllm = next(r for r in reqs if r.name == "vllm")
    # every version the range admits among the index's (0.34.0 the newest on 2026-12-02) and the
    # patch releases that may follow them
    candidates = [f"0.{minor}.{patch}" for minor in range(20, 41) for patch in range(0, 3)]
    admitted = [v for v in candidates if vllm.specifier.contains(v)]
    assert admitted and set(admitted) <= set(ran), (str(vllm.specifier), ran)
    env = (ROOT / "environment.yml").read_text(encoding="utf-8")
    pins = re.findall(r"^\s*-\s*vllm==(\S+)\s*$", env, flags=re.M)
    assert pins and set(pins) <= set(ran), (pins, ran)
