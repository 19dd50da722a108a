"""A quiet terminal (vdlib.utils.terminal): the known warnings of the pinned dependencies are
filtered by message, category and module; the batch runner starts every kernel without tqdm bars and
with the filters, and the heartbeat lines still come through."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
import yaml

from vdlib.utils.terminal import (
    KERNEL_ARGUMENTS,
    KNOWN_WARNINGS,
    QUIET_ENV,
    bars_disabled,
    filter_known_warnings,
    quiet_env,
)

ROOT = Path(__file__).resolve().parent.parent


def _shown(message: str, category: type[Warning], module: str,
           filename: str = "x.py") -> bool:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        filter_known_warnings()
        warnings.warn_explicit(message, category, filename, 1, module=module)
    return bool(seen)


@pytest.mark.parametrize("known", KNOWN_WARNINGS, ids=lambda k: k.module)
def test_each_known_warning_is_filtered_from_its_module_only(known):
    import builtins

    category = getattr(builtins, known.category)
    text = known.message + " and more of the library's text."
    assert not _shown(text, category, known.module)
    assert not _shown(text, category, known.module + ".sub")  # a submodule
    assert _shown(text, category, "vdlib.loop.trainer")  # the same text from elsewhere shows
    assert _shown("another message", category, known.module)  # other warnings of the module
    if category is not Warning:  # another category from the module shows
        assert _shown(text, UserWarning, known.module)


def test_a_compile_time_warning_is_matched_by_its_path():
    """A SyntaxWarning raised while a file compiles carries its path (less .py) as module."""
    path = "/venv/lib/python3.11/site-packages/cellpylib/ca_functions"
    assert not _shown('"is" with a literal. Did you mean "=="?', SyntaxWarning, path)
    assert _shown('"is" with a literal. Did you mean "=="?', SyntaxWarning, "/src/mine/code")
    assert _shown("invalid escape sequence '\\d'", SyntaxWarning, path)


def test_the_transformers_deprecations_of_a_training_run_are_filtered():
    """The two FutureWarnings `make demo` printed, raised as transformers raises them."""
    from transformers import TrainingArguments

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        filter_known_warnings()
        TrainingArguments(output_dir="unused", gradient_checkpointing=False, report_to=[])
    assert not [w for w in seen if issubclass(w.category, FutureWarning)], \
        [str(w.message) for w in seen]


def test_quiet_env_sets_and_restores(monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert not bars_disabled()
    with quiet_env({"EXTRA_FLAG": "1"}):
        assert all(os.environ[k] == v for k, v in QUIET_ENV.items())
        assert os.environ["EXTRA_FLAG"] == "1" and bars_disabled()
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"
    assert "TQDM_DISABLE" not in os.environ and "EXTRA_FLAG" not in os.environ
    assert {"TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS",
            "HF_DATASETS_DISABLE_PROGRESS_BARS"} <= set(QUIET_ENV)


def test_vdlib_bars_ask_the_switch(monkeypatch, capsys):
    """vdlib's own bars pass disable= explicitly (bypassing tqdm's own TQDM_DISABLE), so they
    ask bars_disabled(): the generate bar of a 2-batch call is drawn only when bars are on."""
    from vdlib.engines.generation import HFEngine
    from vdlib.engines.models import load_model

    model, tok = load_model("tiny-random")
    engine = HFEngine(model, tok, batch_size=1, show_progress=True)
    for value, drawn in (("1", False), ("", True)):
        monkeypatch.setenv("TQDM_DISABLE", value)
        engine.generate(["a", "b"], max_new_tokens=2, seed=0)
        assert ("generate" in capsys.readouterr().err) == drawn


def _planned(tmp_path: Path, cells: list[str]) -> tuple[Path, Path]:
    """A one-notebook batch: notebooks/00_probe.ipynb (a parameters cell, then ``cells``) and
    params/tiny/probe.yaml."""
    nb_dir, params = tmp_path / "notebooks", tmp_path / "params" / "tiny"
    nb_dir.mkdir()
    params.mkdir(parents=True)
    source = [{"cell_type": "code", "id": "params", "metadata": {"tags": ["parameters"]},
               "outputs": [], "execution_count": None,
               "source": 'experiment = "probe"\nprofile = "tiny"\noutput_dir = "outputs"'}]
    source += [{"cell_type": "code", "id": f"cell{i}", "metadata": {}, "outputs": [],
                "execution_count": None, "source": c} for i, c in enumerate(cells)]
    nb = {"cells": source, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                       "display_name": "Python 3"}},
          "nbformat": 4, "nbformat_minor": 5}
    (nb_dir / "00_probe.ipynb").write_text(json.dumps(nb))
    (params / "probe.yaml").write_text(yaml.safe_dump(
        {"experiment": "probe", "profile": "tiny", "output_dir": "outputs"}))
    return nb_dir, tmp_path / "params"


def test_the_runner_starts_each_kernel_quiet(tmp_path, monkeypatch):
    """What run_notebooks hands papermill: the quiet environment (for the call only) and the
    kernel arguments that run quiet_kernel() first."""
    import papermill

    from vdlib.app.notebooks import run_notebooks

    seen = {}

    def fake_execute(notebook, output, **kwargs):
        seen.update(env={k: os.environ.get(k) for k in QUIET_ENV}, kwargs=kwargs)
        Path(output).write_text("{}")

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    nb_dir, params = _planned(tmp_path, ["pass"])
    [job] = run_notebooks("tiny", None, nb_dir, params, tmp_path / "out")
    assert job.status == "ran"
    assert seen["env"] == QUIET_ENV
    assert seen["kwargs"]["extra_arguments"] == KERNEL_ARGUMENTS
    assert any("quiet_kernel()" in a for a in KERNEL_ARGUMENTS)
    assert "TQDM_DISABLE" not in os.environ  # restored after the call


def test_a_batch_kernel_prints_heartbeats_but_no_bars_or_known_warnings(tmp_path, capfd,
                                                                         monkeypatch):
    """A real kernel under the runner: a tqdm bar, transformers' bar switch, a known
    FutureWarning of transformers and a heartbeat; only the heartbeat lines (and a warning that
    is not a known one) reach the terminal."""
    from vdlib.app.notebooks import run_notebooks

    monkeypatch.setenv("VDLIB_HEARTBEAT_S", "0.2")
    nb_dir, params = _planned(tmp_path, [
        "import logging, time, warnings\n"
        "from tqdm.auto import tqdm\n"
        "from vdlib.loop.progress import heartbeat\n"
        "from vdlib.utils.terminal import bars_disabled\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "for _ in tqdm(range(3), desc='probe bar'):\n"
        "    time.sleep(0.05)\n"
        "with heartbeat('probe stage'):\n"
        "    time.sleep(0.7)\n"
        "warnings.warn_explicit('`is_gradient_checkpointing` is deprecated and will be removed',"
        " FutureWarning, 'modeling_utils.py', 1, module='transformers.modeling_utils')\n"
        "warnings.warn_explicit('an unknown deprecation', FutureWarning, 'm.py', 1,"
        " module='somewhere')\n"
        "from transformers.utils import logging as hf_logging\n"
        "print('bars', bars_disabled(), hf_logging.is_progress_bar_enabled())\n"])
    [job] = run_notebooks("tiny", None, nb_dir, params, tmp_path / "out", cwd=ROOT)
    assert job.status == "ran", job.error
    out = capfd.readouterr()  # the kernel's own stderr too
    text = out.out + out.err
    assert "bars True False" in text  # vdlib's and transformers' bars are off in the kernel
    assert "probe bar" not in text and "\r" not in text
    assert "probe stage: started" in text and "probe stage: running for" in text
    assert "is_gradient_checkpointing" not in text
    assert "an unknown deprecation" in text  # the filter is narrow
    assert "without encryption" not in text  # ipykernel's start-up notice


def test_the_grading_helper_ignores_an_interrupt_of_its_owners_group():
    """A kernel's shutdown (and a cell's interrupt) sends SIGINT to the kernel's process group,
    the math-verify helper included: it keeps answering, and prints no traceback."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c",
                             "from vdlib.utils.helper_process import serve; "
                             "serve('vdlib.method.grading:_verify_here')"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    try:
        proc.stdin.write(b'["1/2", "0.5", 5]\n')
        proc.stdin.flush()
        assert proc.stdout.readline() == b"1\n"  # started and working
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.stdin.write(b'["3", "4", 5]\n')
        proc.stdin.flush()
        assert proc.stdout.readline() == b"0\n"
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        assert b"KeyboardInterrupt" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_known_log_records_are_dropped_at_their_logger_only(caplog):
    import logging

    from vdlib.utils.terminal import KNOWN_LOG_RECORDS, filter_known_log_records

    known = KNOWN_LOG_RECORDS[0]
    log = logging.getLogger(known.logger)
    before = list(log.filters)
    try:
        filter_known_log_records()
        filter_known_log_records()  # once, however often it is called
        assert len(log.filters) == len(before) + len(KNOWN_LOG_RECORDS)
        with caplog.at_level(logging.INFO):
            log.warning("[RANK 0] %s. The `model_init_kwargs` will be ignored.", known.message)
            log.warning("another warning of the trainer")
            logging.getLogger("vdlib.loop.trainer").warning("%s", known.message)
        assert [r.getMessage()[:30] for r in caplog.records] == [
            "another warning of the trainer", known.message[:30]]
    finally:
        log.filters[:] = before
