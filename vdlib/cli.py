"""Command line: ``vdlib run``, ``vdlib eval``, ``vdlib notebooks run``, ``vdlib params ...``.

    vdlib run params/tiny/quickstart.yaml                       # co-evolution, resumable
    vdlib eval --model smollm2-135m --benchmarks gsm_symbolic --runs 3 --limit 50
    vdlib notebooks run --profile tiny [--only 00_quickstart] [--seeds 0 1 2]  # papermill
    vdlib params check params/paper/base.yaml                   # validate, print resolved YAML
    vdlib params describe                                       # every parameter with its source

Notebook ``notebooks/NN_name.ipynb`` runs with ``params/<profile>/<name>.yaml`` (and its
``<name>@<variant>.yaml`` variants) and its executed copy goes to
``<output-dir>/notebooks/<profile>/``; see :mod:`vdlib.notebooks`. Invalid params fail before any
notebook starts. Re-running ``vdlib run`` with the same params continues after the last
finished stage.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import yaml

from vdlib.config import ENGINE_BACKENDS
from vdlib.notebooks import notebook_params_file  # noqa: F401 - public re-export

logger = logging.getLogger("vdlib")

REPO_ROOT = Path(__file__).resolve().parent.parent


def _cmd_notebooks(args: argparse.Namespace) -> int:
    from vdlib.notebooks import format_summary, run_notebooks

    jobs = run_notebooks(args.profile, args.only, Path(args.notebooks_dir),
                         Path(args.params_dir), Path(args.output_dir), seeds=args.seeds,
                         force=args.force, cwd=REPO_ROOT)
    sys.stdout.write(format_summary(jobs))
    return 1 if any(j.status == "failed" for j in jobs) else 0


def _cmd_run(args: argparse.Namespace) -> int:
    from vdlib.coevolution import run_arms
    from vdlib.config import ConfigError, load_params
    from vdlib.distributed import init_distributed, is_main_process, shutdown_distributed

    init_distributed()  # under `accelerate launch`: join the process group first
    try:
        cfg = load_params(args.params)
        if args.iterations:
            cfg.iterations = args.iterations
        if args.seed is not None:
            cfg.seed = args.seed
        if args.output_dir:
            cfg.output_dir = args.output_dir
        if args.engine:
            cfg.engine.backend = args.engine
    except ConfigError as e:
        sys.stderr.write(f"{args.params}: {e}\n")
        return 2
    results = run_arms(cfg, on_stage=lambda t, s: logger.info("iteration %d: %s ...", t, s))
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


def _cmd_params(args: argparse.Namespace) -> int:
    from vdlib.config import ConfigError, describe, load_params, to_dict

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


def _cmd_eval(args: argparse.Namespace) -> int:
    from vdlib.config import EngineConfig
    from vdlib.engines import open_engine
    from vdlib.evaluation import ROUND_TOKENS, BenchmarkUnavailableError, evaluate, format_table
    from vdlib.models import resolve_device
    from vdlib.registry import UnknownNameError

    out = args.out or str(Path("outputs") / "eval" / args.model.strip("/").replace("/", "__"))
    try:
        device = str(resolve_device(args.device))
        backend = args.engine
        if backend == "auto":
            import importlib.util

            backend = "vllm" if device.startswith("cuda") and importlib.util.find_spec("vllm") \
                else "hf"
        ecfg = EngineConfig(backend=backend, server_url=args.server_url)
        with open_engine(ecfg, args.model, device=device,
                         dtype="bfloat16" if device != "cpu" else "float32",
                         max_new_tokens=args.max_context, max_prompt_tokens=0,
                         batch_size=args.batch_size, round_tokens=ROUND_TOKENS,
                         show_progress=False, seed=args.seed) as engine:
            summary = evaluate(engine, engine.tokenizer, args.benchmarks, runs=args.runs,
                               seed=args.seed, temperature=args.temperature, top_p=args.top_p,
                               max_context=args.max_context, max_new_tokens=args.max_new_tokens,
                               data_dir=args.data_dir, limit=args.limit, out_dir=out,
                               batch_size=args.batch_size)
    except (UnknownNameError, BenchmarkUnavailableError, ValueError) as e:
        sys.stderr.write(f"vdlib eval: {e}\n")
        return 2
    sys.stdout.write(format_table({args.model: summary}, fmt=args.format))
    sys.stdout.write(f"records: {out}\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vdlib", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    rn = sub.add_parser("run", help="run (or resume) a co-evolution experiment")
    rn.add_argument("params", help="params YAML, e.g. params/tiny/quickstart.yaml")
    rn.add_argument("--iterations", type=int, help="override the number of iterations")
    rn.add_argument("--seed", type=int, help="override the run seed")
    rn.add_argument("--output-dir", help="override output_dir")
    rn.add_argument("--engine", choices=ENGINE_BACKENDS,
                    help="override engine.backend (the generation engine of every stage)")
    rn.set_defaults(func=_cmd_run)

    nb = sub.add_parser("notebooks", help="execute the experiment notebooks with papermill")
    nb.add_argument("action", choices=["run"])
    nb.add_argument("--profile", default="tiny", choices=["tiny", "gpu", "paper"])
    nb.add_argument("--only", nargs="+", help="notebook names, e.g. 00_quickstart")
    nb.add_argument("--notebooks-dir", default=str(REPO_ROOT / "notebooks"))
    nb.add_argument("--params-dir", default=str(REPO_ROOT / "params"))
    nb.add_argument("--output-dir", default="outputs", help="executed copies go to "
                    "OUTPUT_DIR/notebooks/<profile>/")
    nb.add_argument("--seeds", nargs="+", type=int, help="override the params' seeds")
    nb.add_argument("--force", action="store_true", help="re-execute complete notebooks too")
    nb.set_defaults(func=_cmd_notebooks)

    pa = sub.add_parser("params", help="validate or describe experiment parameters")
    pa.add_argument("action", choices=["check", "describe"])
    pa.add_argument("file", nargs="?")
    pa.set_defaults(func=_cmd_params)

    ev = sub.add_parser("eval", help="evaluate a model on benchmarks (pass@1 over runs, +- s.e.)")
    ev.add_argument("--model", required=True, help="registered name, local path or Hub id")
    ev.add_argument("--benchmarks", nargs="+", required=True, help="e.g. gsm8k math500")
    ev.add_argument("--runs", type=int, default=3, help="independent runs (seeds seed..seed+k-1)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--data-dir", help="local benchmarks: DIR/<name>/test.jsonl (else the Hub)")
    ev.add_argument("--limit", type=int, help="first N items per benchmark")
    ev.add_argument("--out", help="records folder (default outputs/eval/<model>); resumable")
    ev.add_argument("--temperature", type=float, default=0.7)
    ev.add_argument("--top-p", type=float, default=1.0)
    ev.add_argument("--max-context", type=int, default=4096, help="prompt + answer tokens")
    ev.add_argument("--max-new-tokens", type=int, help="cap on answer tokens (default: none)")
    ev.add_argument("--batch-size", type=int, default=64, help="prompts per generate call")
    ev.add_argument("--device", default="auto")
    ev.add_argument("--engine", default="auto", choices=["auto", *ENGINE_BACKENDS],
                    help="generation engine (auto: vllm on a GPU where vLLM is installed, "
                    "else hf)")
    ev.add_argument("--server-url", help="--engine server: a running vLLM server's base URL "
                    "(default: vdlib starts one)")
    ev.add_argument("--format", choices=["markdown", "latex"], default="markdown")
    ev.set_defaults(func=_cmd_eval)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
