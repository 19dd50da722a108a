"""A grid never calls another config's run done (issue 50, item 1), and ``--run-id`` with arms is
refused in one line instead of being ignored (item 4).

The grid's plan (vdlib.grid.launch.plan_grid) checks each run folder with the fingerprint check
of ``vdlib run`` (vdlib.runs.run_state.folder_config_differences): a finished or partly run folder
of another config is ``refused`` with the keys that differ, locally, on SLURM and from the
notebooks' launcher path, and ``vdlib grid`` then exits 2. Run folders are built as a finished
run leaves them (manifest with fingerprint and stage records, the recorded files) without
running the loop, so every test here takes well under a second of work.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from test_coevolution import tiny_params

from vdlib.app.cli import main
from vdlib.config import layout
from vdlib.config.experiment import load_params
from vdlib.grid.launch import (
    LocalLauncher,
    config_refusal,
    format_plan,
    format_results,
    grid_configs,
    grid_exit_status,
    plan_grid,
)
from vdlib.loop.coevolution import stage_key
from vdlib.loop.stages import STAGE_TABLE
from vdlib.runs.run_start import start_run
from vdlib.runs.run_state import RunConfigMismatch, claim_run, file_record, update_manifest


def _fake_finished(cfg, upto: int | None = None) -> Path:
    """The run folder of ``cfg`` (one run, no arms) as the loop leaves it after ``upto`` stages
    of iteration 1 (None: every stage of every iteration): manifest (fingerprint, records),
    config.yaml, and the recorded files."""
    run = start_run(cfg)
    records, k = {}, 0
    for t in range(1, cfg.iterations + 1):
        folder = layout.iteration_dir(run, t)
        folder.mkdir(exist_ok=True)
        for stage in STAGE_TABLE:
            if upto is not None and k >= upto:
                break
            for name in stage.outputs:
                if name.endswith("_model"):
                    (folder / name).mkdir(exist_ok=True)
                    (folder / name / "model.safetensors").write_bytes(b"weights")
                else:
                    (folder / name).write_text('{"valid_questions": 3}\n')
            records[stage_key(t, stage.name)] = file_record(folder, stage.outputs)
            k += 1
    update_manifest(layout.manifest_path(run), stages=records)
    return run


def _params(tmp_path: Path, **over) -> Path:
    path = tmp_path / "grid.yaml"
    p = tiny_params(tmp_path / "out", arms=["baseline"], seeds=[0])
    for key, value in over.items():  # "curriculum.num_questions" -> nested
        *parents, last = key.split(".")
        node = p
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path.write_text(yaml.safe_dump(p))
    return path


def _finish_grid(path: Path, upto: int | None = None) -> None:
    for c in grid_configs(load_params(path)).values():
        _fake_finished(c, upto)


def test_a_finished_run_of_another_config_is_refused_not_done(tmp_path, capsys):
    """Item 1: a finished run whose params then changed (curriculum.num_questions 4 -> 6) is
    `refused` with the key that differs (as `vdlib run` names it), in the plan, the launch and
    the exit status (2); never `done (skipped)`, `0 ran, 1 skipped`, exit 0."""
    path = _params(tmp_path)
    _finish_grid(path)
    assert [r.state for r in plan_grid(load_params(path))] == ["done"]
    assert main(["grid", str(path), "--gpus", ""]) == 0
    assert "0 ran, 1 skipped" in capsys.readouterr().out

    path = _params(tmp_path, **{"curriculum.num_questions": 6})
    cfg = load_params(path)
    (run,) = plan_grid(cfg)
    assert (run.state, run.note) == ("refused", "curriculum.num_questions: 4 -> 6")
    # the same keys `vdlib run` refuses the folder with
    with pytest.raises(RunConfigMismatch, match=r"curriculum\.num_questions: 4 -> 6"):
        claim_run(run.config)

    assert main(["grid", str(path), "--dry-run", "--gpus", ""]) == 2
    out = capsys.readouterr().out
    assert "| 1 | baseline-seed0 | refused (curriculum.num_questions: 4 -> 6) | - | - |" in out
    assert "done (skipped)" not in out and "1 runs: 0 to launch (0 resumed), 0 done, 1 refused" \
        in out
    assert "resume it with its own config, or give this config another --output-dir" in out

    assert main(["grid", str(path), "--gpus", ""]) == 2
    out = capsys.readouterr().out
    assert "| baseline-seed0 | refused (curriculum.num_questions: 4 -> 6) |" in out
    assert "0 ran, 0 skipped, 0 paused, 1 refused, 0 failed" in out
    assert "skipped)" not in out
    # nothing was started or written: the old run is as it was
    assert not layout.grid_log_path(cfg.output_dir, cfg.experiment, run.name).exists()
    assert "num_questions: 4" in (run.run_dir / "config.yaml").read_text()


def test_a_partly_run_folder_of_another_config_is_refused_and_not_started(tmp_path):
    """Item 1: a folder with some stage records of another config is refused too (launching it
    would only fail in the child); a plain resume (same config) and an extension (only
    `iterations` grew, fixed alpha: vdlib.runs.run_extension) are not."""
    path = _params(tmp_path)
    _finish_grid(path, upto=2)
    assert [r.state for r in plan_grid(load_params(path))] == ["partial"]
    extended = plan_grid(load_params(_params(tmp_path, iterations=2)))
    assert [(r.state, r.note) for r in extended] == [("partial", None)]

    cfg = load_params(_params(tmp_path, **{"scoring.tau_min": 0.25}))
    runs = plan_grid(cfg)
    assert [(r.state, r.note) for r in runs] == [("refused", "scoring.tau_min: 0.3 -> 0.25")]
    launcher = LocalLauncher([None], poll_s=0.01,
                             command=lambda p, g: pytest.fail("started a refused run"))
    runs = launcher.launch(runs)
    assert [(r.status, r.error) for r in runs] == [("refused", "scoring.tau_min: 0.3 -> 0.25")]
    assert grid_exit_status(runs) == 2
    assert "refused: the folder holds a run of another config" in format_results(runs)


def test_stage_records_of_an_unknown_config_are_refused(tmp_path):
    """A folder whose manifest's fingerprint does not match its own config (edited) is refused
    with `vdlib run`'s one line, not counted as done."""
    path = _params(tmp_path)
    _finish_grid(path)
    (c,) = grid_configs(load_params(path)).values()
    manifest = layout.manifest_path(layout.run_path(c))
    data = json.loads(manifest.read_text())
    data["fingerprint"] = "0" * 64
    manifest.write_text(json.dumps(data))
    why = config_refusal(c)
    assert why is not None and "its fingerprint does not match" in why and "\n" not in why
    (run,) = plan_grid(load_params(path))
    assert run.state == "refused"
    assert "| refused (" in format_plan([run], [None])


def test_slurm_and_the_notebooks_launcher_path_refuse_it_too(tmp_path, monkeypatch):
    """Item 1, the other two launch paths: `slurm_launch` submits nothing for a refused run
    (status `refused`), and `run_grid(..., launcher="local")` (the notebooks') raises
    RunConfigMismatch naming the folder and the key rather than returning the old run."""
    from vdlib.experiments.grids import run_grid
    from vdlib.grid.launch import slurm_launch

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    _finish_grid(_params(tmp_path))
    cfg = load_params(_params(tmp_path, **{"curriculum.num_questions": 6}))
    if importlib.util.find_spec("submitit") is not None:
        runs = slurm_launch(plan_grid(cfg), cfg, cluster="local")
        assert [(r.status, r.error) for r in runs] == [
            ("refused", "curriculum.num_questions: 4 -> 6")]
        assert not (layout.grid_dir(cfg.output_dir, cfg.experiment) / "submitit").exists()
    with pytest.raises(RunConfigMismatch) as e:
        run_grid(cfg, launcher="local")
    assert "baseline-seed0 (curriculum.num_questions: 4 -> 6)" in str(e.value)


def test_run_id_with_arms_is_refused_in_one_line_naming_the_flag(tmp_path, capsys):
    """Item 4: `vdlib run PARAMS --run-id X` where PARAMS has arms ran each arm in
    `<arm>-seed<seed>` (the flag ignored), and the refusal that followed told the user to give
    another run id. Now the flag is refused before anything is written, in one line naming it
    and what to do instead; the grid refuses a `run_id` key with arms (or several seeds, which
    would share one folder) the same way."""
    path = _params(tmp_path)
    assert main(["run", str(path), "--run-id", "try2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"{path}: --run-id = 'try2' names one run's")
    assert "arms (baseline), each run in <arm>-seed<seed>" in err and "--output-dir" in err
    assert not (tmp_path / "out").exists()

    keyed = _params(tmp_path, run_id="try2")
    assert main(["grid", str(keyed), "--dry-run", "--gpus", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run_id = 'try2' names one run's folder" in err
    no_arms = _params(tmp_path, run_id="try2", arms=[], seeds=[0, 1])
    with pytest.raises(ValueError, match="several seeds, each run in seed<seed>"):
        grid_configs(load_params(no_arms))
    one = load_params(_params(tmp_path, run_id="try2", arms=[], seeds=[3]))
    assert [c.run_id for c in grid_configs(one).values()] == ["try2"]  # one run: honoured


def test_the_refusal_of_a_changed_config_does_not_suggest_a_run_id_for_arms(tmp_path):
    """Item 4: the refusal of `vdlib run` names --output-dir and experiment first, and a run id
    only for runs without arms (where it helps)."""
    path = _params(tmp_path)
    _finish_grid(path)
    (c,) = grid_configs(load_params(_params(tmp_path, **{"curriculum.num_questions": 6}))).values()
    with pytest.raises(RunConfigMismatch) as e:
        claim_run(c)
    text = str(e.value)
    assert "another --output-dir or experiment (or, for a run without arms, another --run-id)" \
        in text
    assert "another run_id or experiment" not in text
