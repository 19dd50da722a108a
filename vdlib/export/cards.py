"""The dataset card of an exported run and the model card of each exported checkpoint: a
``README.md`` whose YAML front matter (between ``---`` lines, the Hugging Face Hub's card
metadata) holds the provenance, and a short text that says the same in words.

The provenance (:func:`provenance`) is what the run folder records, nothing else: the paper,
the run (name, experiment, arm, seed), the vocabulary-dropout settings (alpha, schedule,
alpha_final, phases), each iteration's alphas and metrics (``metrics.json``), the models, the
config fingerprint and where it comes from, the vdlib version and git commit that made the run
(``manifest.json``) and the vdlib version that exported it. A field the folder does not record
is absent and listed under ``not_recorded`` with the reason. No license is declared: the
questions are model output whose terms follow the models' licenses, which a run does not
record. No token or other secret is ever part of a card (nothing of the environment is read).
"""

from __future__ import annotations

from typing import Any

import yaml

from vdlib.export.curricula import ARROW_DIR, COLUMN_HELP, PARQUET_DIR, split_name
from vdlib.export.run_folder import Iteration, RunFolder

__all__ = ["PAPER", "provenance", "dataset_card", "model_card", "front_matter",
           "card_text"]

#: the paper the run reproduces (``/work/shared/paper``: title and authors as printed)
PAPER = {"title": "Vocabulary Dropout for Curriculum Diversity in LLM Co-Evolution",
         "authors": ["Jacob Dineen", "Aswin RRV", "Zhikun Xu", "Ben Zhou"]}

_VD_KEYS = ("alpha", "schedule", "alpha_final", "phases")


def _size_category(n: int) -> str:
    """The Hub's ``size_categories`` value of ``n`` rows."""
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def provenance(run: RunFolder) -> dict[str, Any]:
    """The run's recorded provenance (see the module docstring), JSON- and YAML-ready."""
    import vdlib

    cfg, man = run.config, run.manifest
    out: dict[str, Any] = {"paper": PAPER, "run": run.name}
    if man.get("experiment") is not None:
        out["experiment"] = man["experiment"]
    if run.arm is not None:
        out["arm"] = run.arm
    if run.seed is not None:
        out["seed"] = int(run.seed)
    if cfg is not None:
        vd = cfg.get("vocab_dropout") or {}
        out["vocab_dropout"] = {k: vd[k] for k in _VD_KEYS if k in vd}
        model = cfg.get("model") or {}
        out["models"] = {"proposer": model.get("proposer"),
                         "solver": model.get("solver") or model.get("proposer")}
        out["iterations_planned"] = cfg.get("iterations")
        out["config_fingerprint"] = run.fingerprint
        out["fingerprint_source"] = run.fingerprint_source
    out["alpha_per_iteration"] = {
        split_name(it.t): {k: it.metrics.get(k) for k in ("alpha_gen", "alpha_train")}
        for it in run.iterations}
    out["iteration_metrics"] = {split_name(it.t): dict(it.metrics) for it in run.iterations}
    versions = man.get("versions") or {}
    if versions:
        out["run_vdlib_version"] = versions.get("vdlib")
        out["versions"] = dict(versions)
    if man.get("git_commit"):
        out["git_commit"] = man["git_commit"]
    out["export_vdlib_version"] = vdlib.__version__
    if run.not_recorded:
        out["not_recorded"] = dict(run.not_recorded)
    return out


def front_matter(text: str) -> dict[str, Any]:
    """The YAML metadata of a card (the block between its first two ``---`` lines); {} if it
    has none."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        return {}
    data = yaml.safe_load("\n".join(lines[1:end]))
    return data if isinstance(data, dict) else {}


def card_text(meta: dict[str, Any], body: str) -> str:
    """``---``, the metadata as YAML, ``---``, then ``body``."""
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n\n{body.rstrip()}\n"


def _settings_line(prov: dict[str, Any]) -> str:
    vd = prov.get("vocab_dropout")
    if not vd:
        return ("The run folder records no config: the vocabulary-dropout settings are the "
                "alpha column and `alpha_per_iteration` (from each iteration's metrics.json).")
    alpha = vd.get("alpha")
    masked = "no mask (baseline)" if alpha == 1 else f"alpha = {alpha}"
    return (f"Vocabulary dropout: {masked}, schedule `{vd.get('schedule')}` (alpha_final "
            f"{vd.get('alpha_final')}), phases `{vd.get('phases')}`.")


def dataset_card(run: RunFolder, dataset: Any, arrow: bool = True) -> str:
    """The export's ``README.md``: metadata (the Hub's keys, ``configs`` naming each split's
    parquet file, and ``vdlib``: :func:`provenance`) and a text that says how to load it."""
    prov = provenance(run)
    splits = [split_name(it.t) for it in run.iterations]
    rows = sum(len(d) for d in dataset.values())
    meta = {
        "pretty_name": f"vdlib curricula: {run.name}",
        "tags": ["vdlib", "vocabulary-dropout", "self-play", "co-evolution", "synthetic",
                 "math"],
        "task_categories": ["question-answering"],
        "size_categories": [_size_category(rows)],
        "configs": [{"config_name": "default",
                     "data_files": [{"split": s, "path": f"{PARQUET_DIR}/{s}.parquet"}
                                    for s in splits]}],
        "vdlib": prov,
    }
    columns = "\n".join(f"| `{k}` | {kind} | {why} |" for k, (kind, why) in COLUMN_HELP.items())
    split_rows = "\n".join(
        f"| `{split_name(it.t)}` | {len(dataset[split_name(it.t)])} | "
        f"{it.metrics.get('valid_questions')} | {it.metrics.get('curriculum_size')} | "
        f"{it.metrics.get('alpha_gen')} |" for it in run.iterations)
    who = ", ".join(f"{k} `{prov[k]}`" for k in ("experiment", "arm", "seed") if k in prov)
    models = prov.get("models")
    load_from_disk = (f'ds = load_from_disk("path/to/this/folder/{ARROW_DIR}")  # the Arrow copy '
                      "(not pushed to the Hub)\n" if arrow else "")
    body = f"""# vdlib curricula: {run.name}

Every question the proposer generated in each co-evolution iteration of the run `{run.name}`
({who or 'no experiment, arm or seed recorded'}), with the proposer's answer, the frozen
solver's answers, their majority and the self-consistency `acc`, whether it parsed, its
generation batch's vocabulary-mask seed and alpha, and whether the curriculum kept it. Made
with vdlib, the reference implementation of *{PAPER['title']}*.

{_settings_line(prov)}
Models: {f"proposer `{models['proposer']}`, solver `{models['solver']}`" if models else
         "not recorded (see `not_recorded` in the metadata)"}.
Config fingerprint: `{prov.get('config_fingerprint', 'not recorded')}`.

| split | questions | valid | curriculum | alpha (gen) |
|---|---|---|---|---|
{split_rows}

## Load it

```python
from datasets import load_dataset{", load_from_disk" if arrow else ""}
ds = load_dataset("parquet", data_files={{"{splits[0]}": "{PARQUET_DIR}/{splits[0]}.parquet"}})
ds = load_dataset("path/to/this/folder")        # every split, from this card's `configs`
{load_from_disk}# vdlib: load_curricula("path/to/this/folder"); curricula_frame(...): pandas
```

## Columns

| column | type | meaning |
|---|---|---|
{columns}

The metadata's `vdlib` block is the run's provenance as its folder records it: each
iteration's `metrics.json` under `iteration_metrics`, the versions and git commit of
`manifest.json`. Fields the folder does not record are absent and listed under
`not_recorded` with the reason. No license is declared: the questions are model output under
the terms of the models that wrote them.
"""
    return card_text(meta, body)


def model_card(run: RunFolder, it: Iteration, role: str, previous: str) -> str:
    """The ``README.md`` beside an exported checkpoint: the same provenance plus its role,
    iteration and what it was trained from (``previous``)."""
    prov = provenance(run)
    base = (prov.get("models") or {}).get(role)
    meta: dict[str, Any] = {"library_name": "transformers",
                            "tags": ["vdlib", "vocabulary-dropout", "self-play", role]}
    if base and "/" in str(base) and not str(base).startswith(("/", ".")):
        meta["base_model"] = base  # a Hub id; a registered name or a local path is not one
    meta["vdlib"] = {**prov, "role": role, "iteration": it.t, "trained_from": previous,
                     "iteration_metrics": {split_name(it.t): dict(it.metrics)}}
    meta["vdlib"].pop("alpha_per_iteration", None)
    meta["vdlib"]["alpha"] = {k: it.metrics.get(k) for k in ("alpha_gen", "alpha_train")}
    what = ("the proposer after its GRPO phase (it wrote this iteration's questions)"
            if role == "proposer" else "the solver after GRPO on this iteration's curriculum")
    body = f"""# vdlib {role}: {run.name}, iteration {it.t}

{what[0].upper() + what[1:]}, from the co-evolution run `{run.name}`. Trained from {previous}.
{_settings_line(prov)}
Config fingerprint: `{prov.get('config_fingerprint', 'not recorded')}`.
Iteration {it.t}: {it.metrics.get('valid_questions')} valid questions of
{it.metrics.get('generated')}, curriculum {it.metrics.get('curriculum_size')}.

The metadata's `vdlib` block holds the full provenance (the run's recorded config settings,
metrics, versions); fields the run does not record are listed under `not_recorded`.
"""
    return card_text(meta, body)
