"""``vdlib results FILE --out DIR``: the figure and tables of one results file (a co-evolution
file: :mod:`vdlib.report.results`; a single-policy one: :mod:`vdlib.report.results_single_policy`),
the effects tables printed; ``vdlib results --write MD`` / ``--check MD``: every generated block
of a markdown report (docs/RESULTS.md) from the results files alone
(:mod:`vdlib.report.results_blocks`). Bad input is one line and exit status 2; a stale block
under ``--check`` is one line and exit status 1."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

__all__ = ["add_results_command"]


def add_results_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``vdlib results`` through the main parser's ``command`` (its subparser factory)."""
    rs = command("results", help="draw the figure and tables of a committed results JSON",
                 description="The report step on a results file alone (vdlib.report.results): the "
                 "diversity figure, per-iteration summary, pass@1 and effects tables (a "
                 "single-policy file: vdlib.report.results_single_policy, the entropy figure "
                 "and tables); prints the effects tables (Welch's and the paired t-test of "
                 "each arm against the baseline, vdlib.utils.stats.compare_seeds). With --write "
                 "or --check MD: every generated block of MD from the results files alone "
                 "(vdlib.report.results_blocks).")
    rs.add_argument("file", nargs="?", help="results JSON (e.g. docs/results/gpu_small_main.json)")
    rs.add_argument("--out", help="folder for the figure and tables (with FILE)")
    rs_md = rs.add_mutually_exclusive_group()
    rs_md.add_argument("--write", metavar="MD", help="rewrite every generated block of MD "
                       "(e.g. docs/RESULTS.md) from the results files")
    rs_md.add_argument("--check", metavar="MD", help="exit 1 if a generated block of MD is not "
                       "what the results files give")
    rs.add_argument("--results-dir", help="the results files of --write/--check (default: "
                    "results/ beside MD)")
    rs.set_defaults(func=_cmd_results)


def _cmd_results(args: argparse.Namespace) -> int:
    from vdlib.report.results import ResultsFileError, read_json_file, results_report
    from vdlib.report.results_single_policy import is_single_policy, single_policy_report

    md = args.write or args.check
    if bool(md) == bool(args.file) or bool(args.file) != bool(args.out):
        sys.stderr.write("vdlib results: give FILE --out DIR, or --write/--check MD\n")
        return 2
    if md:  # every generated block of a markdown report from the results files alone
        from vdlib.report.results_blocks import blocks_command

        code, line = blocks_command(md, args.results_dir, write=bool(args.write))
        (sys.stderr if code else sys.stdout).write(f"vdlib results: {line}\n")
        return code
    try:  # a co-evolution file (records) or a single-policy one (runs); each checked first
        data = read_json_file(args.file)  # read once: the dispatch and the report share it
        report = single_policy_report if is_single_policy(data) else results_report
        written = report(args.file, args.out, data=data)
    except ResultsFileError as e:
        sys.stderr.write(f"vdlib results: {e}\n")
        return 2
    from vdlib.metrics.cov_activity import inactive_cov_warnings

    # a KL-Cov / Clip-Cov arm that never acted (or whose records cannot say)
    for line in inactive_cov_warnings(data.get("records", []) if isinstance(data, dict) else []):
        sys.stderr.write(f"vdlib results: warning: {line}\n")
    for effects in [p for p in written if p.name.endswith("_effects.md")]:
        # the arm-vs-arm comparisons (vdlib.utils.stats.compare_seeds)
        sys.stdout.write(effects.read_text(encoding="utf-8") + "\n")
    for path in written:
        sys.stdout.write(f"{path}\n")
    return 0
