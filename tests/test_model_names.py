"""Model names are config's data (vdlib/config/model_names.py): the engines register one loader
per name, and loading any shipped params file imports neither torch nor any engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vdlib.config import model_names as config_names
from vdlib.config.experiment import PROFILE_PRESETS, ConfigError, load_params

ROOT = Path(__file__).resolve().parent.parent
PARAMS_FILES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "params").rglob("*.yaml"))


def test_every_name_has_a_loader_and_every_loader_a_name():
    from vdlib.engines import models

    assert models.MODELS.names() == list(config_names.MODEL_NAMES)
    assert models.model_names() == config_names.model_names()
    for name in config_names.MODEL_NAMES:
        assert callable(models.MODELS.get(name))
    # the aliases' loaders load their Hub ids; the tokenizer rule covers registered names only
    for alias, hub_id in config_names.HUB_ALIASES.items():
        assert models.MODELS.get(alias).args == (hub_id,)
    assert set(config_names.SMOLLM2_TOKENIZER_NAMES) <= set(config_names.MODEL_NAMES)


def test_the_names_are_sorted_unique_and_none_looks_like_a_hub_id_or_path():
    names = config_names.model_names()
    assert names == sorted(set(names)) == list(config_names.MODEL_NAMES)
    assert {"smollm2-135m", "tiny-random", "qwen3-4b-base", "qwen3-8b-base"} == set(names)
    assert not any("/" in n or n.startswith((".", "~")) for n in names)
    names.append("x")  # a copy: the data stays as it is
    assert "x" not in config_names.MODEL_NAMES


def test_config_validates_against_the_names_without_the_engines():
    for name in config_names.MODEL_NAMES:
        assert load_params({"profile": "tiny", "model": {"proposer": name}}).model.proposer == name
    with pytest.raises(ConfigError, match=r"model.proposer = 'tiny-randm' is not a known model "
                                          r"\(did you mean 'tiny-random'\?\); allowed values: "
                                          + ", ".join(config_names.MODEL_NAMES)):
        load_params({"profile": "tiny", "model": {"proposer": "tiny-randm"}})


_PROBE = """
import json, sys
HEAVY = ("torch", "transformers", "vllm")
def heavy():
    return sorted(m for m in sys.modules if m.split(".")[0] in HEAVY
                  or m == "vdlib.engines" or m.startswith("vdlib.engines."))
import vdlib.config
from vdlib.config import load_params
found = {"import vdlib.config": heavy()}
for source in json.loads(sys.argv[1]):
    load_params(source)
    found[str(source)] = heavy()
print(json.dumps(found))
"""


def test_load_params_of_every_shipped_params_file_imports_no_torch_nor_any_engine():
    assert len(PARAMS_FILES) >= 30  # params/{tiny,smollm2,gpu-small,gpu,paper}/*.yaml
    sources = [None, *({"profile": p} for p in PROFILE_PRESETS), *PARAMS_FILES]
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(sources)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    found = json.loads(out)
    assert len(found) == len(sources) + 1
    imported = [(source, mods) for source, mods in found.items() if mods]
    assert not imported, (f"{len(imported)} of {len(found)} steps imported torch or an engine; "
                          f"the first, {imported[0][0]}: {imported[0][1]}")
