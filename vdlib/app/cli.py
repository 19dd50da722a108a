"""Command line: ``vdlib run``, ``vdlib grid``, ``vdlib eval``, ``vdlib notebooks run``,
``vdlib params ...``.

    vdlib run params/tiny/quickstart.yaml                       # co-evolution, resumable
    vdlib eval --model smollm2-135m --benchmarks gsm_symbolic --runs 3 --limit 50
    vdlib eval --model smollm2-135m --profile tiny          # the tiny profile's evaluation
    vdlib grid params/tiny/main_table.yaml --dry-run            # arms x seeds: the plan
    vdlib grid params/gpu/main_table.yaml --launcher local      # one run per GPU, queued
    vdlib status outputs                                        # every run: stage, metrics
    vdlib plan params/gpu-small/main_table.yaml --card h200     # its cost, before anything loads
    vdlib notebooks run --profile tiny [--only 00_quickstart] [--seeds 0 1 2]  # papermill
    vdlib notebooks run --profile gpu-small --only 01_main_table --set iterations=1 --arms vd75
    vdlib notebooks merge A.json B.json --out C.json    # one experiment's results, two machines
    vdlib params check params/paper/base.yaml                   # validate, print resolved YAML
    vdlib params describe                                       # every parameter with its source

Notebook ``notebooks/NN_name.ipynb`` runs with ``params/<profile>/<name>.yaml`` (and its
``<name>@<variant>.yaml`` variants) and its executed copy goes to
``<output-dir>/notebooks/<profile>/``; see :mod:`vdlib.app.notebooks`. Invalid params fail before
any notebook starts. Re-running ``vdlib run`` with the same params continues after the last
finished stage.

``vdlib eval`` takes every evaluation setting from a config's ``evaluation`` section (that of
``--params FILE``, else of ``--profile``, default ``paper``: the paper's protocol) together with
its ``seed``, ``output_dir``, ``model.device``, ``model.dtype`` and ``engine`` settings; its flags
only override them, and the result is validated like any params before a model loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from vdlib.app.cli_export import add_export_command
from vdlib.app.cli_inputs import (  # noqa: F401 - public re-export
    INTERRUPTED_EXIT,
    check_minutes_flag,
    disk_full_failure,
)
from vdlib.app.cli_results import add_results_command
from vdlib.app.notebooks import notebook_params_file  # noqa: F401 - public re-export
from vdlib.config.experiment import (
    ENGINE_BACKENDS,
    PROFILE_PRESETS,
    EvaluationConfig,
    ExperimentConfig,
)
from vdlib.grid.cli_errors import exit_on_sigterm, expected_failure  # noqa: F401 - public re-export

logger = logging.getLogger("vdlib")

REPO_ROOT = Path(__file__).resolve().parents[2]


def _cmd_notebooks(args: argparse.Namespace) -> int:
    from vdlib.app.notebooks import format_summary, merge_command, run_notebooks

    if args.action == "merge":
        return merge_command(args.files, args.out)
    if args.files:
        sys.stderr.write("vdlib notebooks run: takes no files (merge does)\n")
        return 2
    jobs = run_notebooks(args.profile, args.only, Path(args.notebooks_dir),
                         Path(args.params_dir), Path(args.output_dir), seeds=args.seeds,
                         force=args.force, cwd=REPO_ROOT, arms=args.arms, sets=args.set)
    sys.stdout.write(format_summary(jobs))
    return 1 if any(j.status == "failed" for j in jobs) else 0


def set_stop_after(minutes: float | None) -> None:
    """``--stop-after MINUTES``: no stage starts that would not end within that time from now
    (``$VDLIB_STOP_AT``, which a grid's runs inherit;
    :func:`vdlib.loop.progress.check_deadline`)."""
    from vdlib.loop.progress import STOP_AT_ENV

    if minutes is not None:
        os.environ[STOP_AT_ENV] = str(time.time() + 60.0 * minutes)


def _cmd_run(args: argparse.Namespace) -> int:
    from vdlib.config.experiment import ConfigError, load_params
    from vdlib.loop.coevolution import run_arms
    from vdlib.loop.distributed import init_distributed, is_main_process, shutdown_distributed
    from vdlib.loop.progress import PAUSED_EXIT, RunPaused

    init_distributed()  # under `accelerate launch`: join the process group first
    over: dict[str, Any] = {}
    if args.iterations is not None:
        over["iterations"] = args.iterations
    if args.seed is not None:
        over["seed"] = args.seed
    if args.output_dir is not None:
        over["output_dir"] = args.output_dir
    if args.run_id is not None:
        over["run_id"] = args.run_id
    if args.engine:
        over["engine"] = {"backend": args.engine}
    try:
        check_minutes_flag("--stop-after", args.stop_after)
        cfg = load_params(args.params, over)  # flags are validated like the file's keys
    except ConfigError as e:
        sys.stderr.write(f"{args.params}: {e}\n")
        return 2
    if cfg.arms and cfg.run_id:  # each arm runs in <arm>-seed<seed>: an id would be ignored
        from vdlib.grid.launch import run_id_refusal

        name = "--run-id" if args.run_id is not None else "run_id"
        sys.stderr.write(f"{args.params}: {run_id_refusal(cfg.run_id, cfg.arms, name)}\n")
        return 2
    set_stop_after(args.stop_after)
    try:
        results = run_arms(cfg, on_stage=lambda t, s: logger.info("iteration %d: %s ...", t, s),
                           force=args.force)
    except RunPaused as e:
        logger.warning("%s", e)
        shutdown_distributed()
        return PAUSED_EXIT
    main = is_main_process()
    shutdown_distributed()
    if not main:
        return 0
    for arm, result in results.items():
        for m in result.iterations:
            sys.stdout.write(
                f"{arm} iteration {m['iteration']}: alpha train {m['alpha_train']:.4g} / gen "
                f"{m['alpha_gen']:.4g}, valid questions "
                f"{m['valid_questions']}/{m['generated']}, mean acc {m['mean_acc']}, curriculum "
                f"{m['curriculum_size']}, kept fraction {m['kept_fraction']}\n")
        sys.stdout.write(f"{arm} artifacts: {result.run_dir}\n")
    return 0


def _cmd_grid(args: argparse.Namespace) -> int:
    from vdlib.config.experiment import ConfigError, load_params
    from vdlib.grid.launch import (
        LocalLauncher,
        format_plan,
        format_results,
        gpu_slots,
        grid_exit_status,
        plan_grid,
        slurm_launch,
        visible_gpus,
    )

    over: dict[str, Any] = {"launcher": {}}
    if args.launcher:
        over["launcher"]["kind"] = args.launcher
    if args.gpus_per_run is not None:
        over["launcher"]["gpus_per_run"] = args.gpus_per_run
    if args.max_parallel is not None:
        over["launcher"]["max_parallel"] = args.max_parallel
    slurm = {k: v for k, v in (("partition", args.partition), ("time_min", args.time_min),
                               ("account", args.account)) if v is not None}
    if slurm:
        over["launcher"]["slurm"] = slurm
    if args.output_dir is not None:
        over["output_dir"] = args.output_dir
    if args.seeds is not None:  # validated like the file's seeds: range and number
        over["seeds"] = args.seeds
    try:
        check_minutes_flag("--stop-after", args.stop_after)
        cfg = load_params(args.params, over)
        runs = plan_grid(cfg, args.seeds, verify=args.verify)
        kind = cfg.launcher.kind
        # --gpus '' (or ' , '): no GPU, CPU runs; never a GPU named ''
        gpus = ([g.strip() for g in args.gpus.split(",") if g.strip()]
                if args.gpus is not None else visible_gpus())
        slots = gpu_slots(gpus, cfg.launcher.gpus_per_run, cfg.launcher.max_parallel) \
            if kind == "local" else [None] * min(cfg.launcher.slurm.array_parallelism,
                                                 max(1, len(runs)))
    except (ConfigError, ValueError) as e:
        sys.stderr.write(f"{args.params}: {e}\n")
        return 2
    sys.stdout.write(format_plan(runs, slots))
    if args.dry_run:
        return grid_exit_status(runs)  # 2 where a run is refused (its folder: another config)
    set_stop_after(args.stop_after)
    if kind == "slurm":
        runs = slurm_launch(runs, cfg, cluster=args.cluster, wait=not args.no_wait)
    else:
        runs = LocalLauncher(slots).launch(runs)
    sys.stdout.write(format_results(runs))
    # 2 refused, 1 failed, 75 paused or busy (launch the grid again later), else 0
    return grid_exit_status(runs)


def _cmd_status(args: argparse.Namespace) -> int:
    from vdlib.grid.status import main as status_main

    return status_main(args.output_dir, include_replaced=args.include_replaced,
                       verify=args.verify)


def _cmd_params(args: argparse.Namespace) -> int:
    from vdlib.config.experiment import ConfigError, describe, load_params, to_dict

    if args.action == "describe":
        rows = describe()
        sys.stdout.write("| key | paper default | meaning and source |\n|---|---|---|\n")
        for key, default, help_text in rows:
            sys.stdout.write(f"| `{key}` | `{default}` | {help_text} |\n")
        return 0
    if not args.file:
        raise SystemExit("vdlib params check FILE: give a params YAML")
    try:
        cfg = load_params(args.file)
    except ConfigError as e:
        sys.stderr.write(f"{args.file}: {e}\n")
        return 2
    sys.stdout.write(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return 0


#: ``vdlib eval`` flags that override the ``evaluation`` section (flag dest = config key).
EVAL_FLAG_KEYS = ("benchmarks", "runs", "temperature", "top_p", "max_context", "max_new_tokens",
                  "data_dir", "limit", "batch_size", "olympiadbench_subset", "se_ddof")


def eval_config(args: argparse.Namespace) -> ExperimentConfig:
    """The validated config ``vdlib eval`` runs under: ``--params`` (else ``--profile``) with the
    flags given merged over it. Raises :class:`vdlib.config.experiment.ConfigError` naming the
    key."""
    from vdlib.config.experiment import load_params, merge_params, to_dict

    base = (to_dict(load_params(args.params)) if args.params
            else {"profile": args.profile or ExperimentConfig.profile})
    over: dict[str, Any] = {"evaluation": {k: getattr(args, k) for k in EVAL_FLAG_KEYS
                                           if getattr(args, k) is not None}}
    if args.seed is not None:
        over["seed"] = args.seed
    if args.device is not None:
        over["model"] = {"device": args.device}
    if args.server_url is not None:
        over["engine"] = {"server_url": args.server_url}
    return load_params(merge_params(base, over))


def _eval_backend(choice: str, device: str) -> str:
    """``--engine auto``: vLLM on a GPU where vLLM is installed, else transformers."""
    if choice != "auto":
        return choice
    import importlib.util

    return "vllm" if device.startswith("cuda") and importlib.util.find_spec("vllm") else "hf"


def _cmd_eval(args: argparse.Namespace) -> int:
    from vdlib.config.experiment import ConfigError
    from vdlib.engines.models import resolve_device
    from vdlib.engines.setting import open_engine
    from vdlib.evaluation import ROUND_TOKENS, BenchmarkUnavailableError, evaluate, format_table
    from vdlib.utils.registry import UnknownNameError

    try:
        cfg = eval_config(args)  # every argument error surfaces here, before any model loads
    except ConfigError as e:
        sys.stderr.write(f"vdlib eval: {e}\n")
        return 2
    ev = cfg.evaluation
    out = args.out or str(Path(cfg.output_dir) / "eval"
                          / args.model.strip("/").replace("/", "__"))
    try:
        device = str(resolve_device(cfg.model.device))
        ecfg = dataclasses.replace(cfg.engine, backend=_eval_backend(args.engine, device))
        with open_engine(ecfg, args.model, device=device,
                         dtype=cfg.model.dtype if device != "cpu" else "float32",
                         cache_dir=cfg.model.cache_dir, max_new_tokens=ev.max_context,
                         max_prompt_tokens=0, batch_size=ev.batch_size,
                         round_tokens=ROUND_TOKENS, show_progress=False,
                         seed=cfg.seed) as engine:
            summary = evaluate(engine, engine.tokenizer, ev.benchmarks, runs=ev.runs,
                               seed=cfg.seed, temperature=ev.temperature, top_p=ev.top_p,
                               max_context=ev.max_context, max_new_tokens=ev.max_new_tokens,
                               data_dir=ev.data_dir, limit=ev.limit, out_dir=out,
                               batch_size=ev.batch_size)
    except (UnknownNameError, BenchmarkUnavailableError, ValueError) as e:
        sys.stderr.write(f"vdlib eval: {e}\n")
        return 2
    sys.stdout.write(format_table({args.model: summary}, fmt=args.format))
    sys.stdout.write(f"records: {out}\n")
    return 0


def _config_help(section: type, key: str) -> str:
    """A flag's help: the config field's own help text and its ``paper`` default."""
    f = next(x for x in dataclasses.fields(section) if x.name == key)
    default = getattr(section(), key)
    shown = (" ".join(map(str, default)) if isinstance(default, list)
             else "null" if default is None else default)
    text = f"{f.metadata['help']} Default: {shown}."
    return text.replace("%", "%%")  # argparse formats help with %


STOP_AFTER_HELP = ("start no stage that would not end within MINUTES from now (its estimate: "
                   "the same stage's time in the previous iteration); the run pauses with exit "
                   "status 75 and the same command resumes it")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vdlib", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="debug logging, and the full traceback of an error")
    verbose = argparse.ArgumentParser(add_help=False)  # -v after the subcommand too
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="debug logging, and the full traceback of an error")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[verbose], **kwargs)

    rn = command("run", help="run (or resume) a co-evolution experiment")
    rn.add_argument("params", help="params YAML, e.g. params/tiny/quickstart.yaml")
    rn.add_argument("--iterations", type=int, help="override the number of iterations")
    rn.add_argument("--seed", type=int, help="override the run seed")
    rn.add_argument("--output-dir", help="override output_dir")
    rn.add_argument("--engine", choices=ENGINE_BACKENDS,
                    help="override engine.backend (the generation engine of every stage)")
    rn.add_argument("--run-id", help="override run_id (a new folder: e.g. to keep a finished "
                    "run and start another with a changed config); refused for params with "
                    "arms, whose runs are named <arm>-seed<seed> (give another --output-dir)")
    rn.add_argument("--force", action="store_true",
                    help="a run folder that holds another config is moved aside to "
                    "<run_id>.replaced-<time> and the run starts afresh (old and new results "
                    "are never mixed); without it such a folder is refused")
    rn.add_argument("--stop-after", type=float, metavar="MINUTES",
                    help=STOP_AFTER_HELP)
    rn.set_defaults(func=_cmd_run)

    gr = command("grid", help="run a grid (arms x seeds) on this machine's GPUs or on SLURM",
                 description="Every arm of the params' arms for every seed, each in its own run "
                 "folder; finished runs are skipped, unfinished ones resume. Defaults: the "
                 "params' launcher section.")
    gr.add_argument("params", help="params YAML with arms and seeds")
    gr.add_argument("--seeds", nargs="+", type=int, help="override the params' seeds")
    gr.add_argument("--launcher", choices=["local", "slurm"], help="override launcher.kind")
    gr.add_argument("--gpus", help="local: comma-separated GPU ids to use (default: "
                    "CUDA_VISIBLE_DEVICES, else every GPU torch sees; '' = CPU)")
    gr.add_argument("--gpus-per-run", type=int, help="override launcher.gpus_per_run")
    gr.add_argument("--max-parallel", type=int, help="override launcher.max_parallel")
    gr.add_argument("--partition", help="slurm: override launcher.slurm.partition")
    gr.add_argument("--time-min", type=int, help="slurm: override launcher.slurm.time_min")
    gr.add_argument("--account", help="slurm: override launcher.slurm.account")
    gr.add_argument("--cluster", choices=["slurm", "local", "debug"],
                    help="slurm: submitit's executor (default: SLURM when sbatch exists; "
                    "local runs the job array on this machine)")
    gr.add_argument("--no-wait", action="store_true", help="slurm: submit and return")
    gr.add_argument("--output-dir", help="override output_dir")
    gr.add_argument("--dry-run", action="store_true",
                    help="print the plan (runs, state, GPUs, order) and launch nothing")
    gr.add_argument("--verify", action="store_true",
                    help="check every recorded file's SHA-256 before counting a run as done "
                    "(default: sizes, and the hashes of files up to 1 MiB)")
    gr.add_argument("--stop-after", type=float, metavar="MINUTES",
                    help=STOP_AFTER_HELP + " (for every run of the grid)")
    gr.set_defaults(func=_cmd_grid)

    add_results_command(command)  # vdlib.app.cli_results

    st = command("status", help="where every run of an output folder stands (one table)")
    st.add_argument("output_dir", nargs="?", default=ExperimentConfig.output_dir)
    st.add_argument("--include-replaced", action="store_true",
                    help="also list run folders that --force set aside")
    st.add_argument("--verify", action="store_true",
                    help="check every recorded file's SHA-256 and form, as a resume does "
                    "(default: sizes, and the hashes of files up to 1 MiB)")
    st.set_defaults(func=_cmd_status)

    nb = command("notebooks", help="execute the experiment notebooks with papermill")
    nb.add_argument("action", choices=["run", "merge"], help="run: execute the notebooks; "
                    "merge FILE... --out FILE: join one experiment's results JSONs")
    nb.add_argument("files", nargs="*", help="merge: results JSONs, earliest first")
    nb.add_argument("--out", help="merge: the joined results JSON")
    nb.add_argument("--profile", default="tiny",
                    help="a folder of --params-dir: tiny, gpu, gpu-small, paper")
    nb.add_argument("--only", nargs="+", help="notebook names, e.g. 00_quickstart, or one "
                    "variant, e.g. 01_main_table@fail_neg")
    nb.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a config key in every params file (YAML value; "
                    "repeatable), e.g. --set curriculum.num_questions=64")
    nb.add_argument("--arms", nargs="+", help="run only these arms of each params file")
    nb.add_argument("--notebooks-dir", default=str(REPO_ROOT / "notebooks"))
    nb.add_argument("--params-dir", default=str(REPO_ROOT / "params"))
    nb.add_argument("--output-dir", default=ExperimentConfig.output_dir,
                    help="the one output root, relative to the working directory: runs and "
                    "reports go to OUTPUT_DIR/<experiment>/ (it replaces the params' "
                    "output_dir), executed copies to OUTPUT_DIR/notebooks/<profile>/")
    nb.add_argument("--seeds", nargs="+", type=int, help="override the params' seeds")
    nb.add_argument("--force", action="store_true", help="re-execute complete notebooks too")
    nb.set_defaults(func=_cmd_notebooks)

    pa = command("params", help="validate or describe experiment parameters")
    pa.add_argument("action", choices=["check", "describe"])
    pa.add_argument("file", nargs="?")
    pa.set_defaults(func=_cmd_params)

    from vdlib.app.plan_report import add_plan_command  # light: no torch, no model

    add_plan_command(command)
    add_export_command(command)  # vdlib.app.cli_export: datasets loads on use

    ev = command("eval", help="evaluate a model on benchmarks (pass@1 over runs, +- s.e.)",
                        description="Defaults: the evaluation section of --params, else of "
                        "--profile (paper: the paper's protocol); the flags override it. The "
                        "defaults shown are the paper profile's.")
    ev.add_argument("--model", required=True, help="registered name, local path or Hub id")
    src = ev.add_mutually_exclusive_group()
    src.add_argument("--profile", choices=list(PROFILE_PRESETS),
                     help=f"take the defaults from this profile (default "
                     f"{ExperimentConfig.profile})")
    src.add_argument("--params", help="take the defaults from this params YAML (its evaluation "
                     "section, seed, output_dir, model.device, model.dtype and engine)")
    ev.add_argument("--benchmarks", nargs="+", metavar="NAME",
                    help=_config_help(EvaluationConfig, "benchmarks"))
    for key, kind in (("runs", int), ("temperature", float), ("top_p", float),
                      ("max_context", int), ("max_new_tokens", int), ("data_dir", str),
                      ("limit", int), ("batch_size", int), ("olympiadbench_subset", str),
                      ("se_ddof", int)):
        ev.add_argument(f"--{key.replace('_', '-')}", type=kind,
                        help=_config_help(EvaluationConfig, key))
    ev.add_argument("--seed", type=int, help="seed of run 0 (run r uses seed + r); default: the "
                    f"config's seed ({ExperimentConfig.seed})")
    ev.add_argument("--out", help="records folder (default <output_dir>/eval/<model>); "
                    "resumable")
    ev.add_argument("--device", help="override model.device (default: the config's, "
                    f"{ExperimentConfig().model.device})")
    ev.add_argument("--engine", default="auto", choices=["auto", *ENGINE_BACKENDS],
                    help="generation engine (auto: vllm on a GPU where vLLM is installed, "
                    "else hf); the config's engine section supplies its other settings")
    ev.add_argument("--server-url", help="--engine server: a running vLLM server's base URL "
                    "(default: the config's engine.server_url; null: vdlib starts one)")
    ev.add_argument("--format", choices=["markdown", "latex"], default="markdown")
    ev.set_defaults(func=_cmd_eval)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    exit_on_sigterm()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from vdlib.config.env_settings import check_environment
    from vdlib.config.experiment import ConfigError

    try:  # the VDLIB_* settings a command (or a grid's runs) reads later, checked first
        check_environment()
    except ConfigError as e:
        sys.stderr.write(f"vdlib {args.command}: {e}\n")
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C: every file is whole or absent, a rerun resumes
        if args.verbose:
            raise
        sys.stderr.write(f"vdlib {args.command}: interrupted; resume with the same command\n")
        return INTERRUPTED_EXIT
    except Exception as e:  # noqa: BLE001 - expected failures get one line, others re-raise
        from vdlib.loop.progress import BUSY_EXIT
        from vdlib.runs.run_state import RunLockedError

        message = expected_failure(e) or disk_full_failure(e)
        if message is None or args.verbose:
            raise
        sys.stderr.write(f"vdlib {args.command}: {message}\n(-v shows the traceback)\n")
        # a folder in use by another process: its own status, so that a grid says "busy"
        return BUSY_EXIT if type(e) is RunLockedError else 2


if __name__ == "__main__":
    raise SystemExit(main())
