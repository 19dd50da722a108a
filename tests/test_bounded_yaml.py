"""Bounded YAML (docs/reliability.md, issue 29 item 4): a params file or a run's config.yaml is
read within a size, value-count and depth bound, aliases expanded in the count, and no error
message formats an unbounded value."""

from __future__ import annotations

import tracemalloc

import pytest
import yaml

from vdlib.app.cli import main
from vdlib.config.experiment import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    ConfigError,
    load_params,
    read_params_file,
)

#: The alias bomb of issue 29: a few hundred bytes, 9 levels of 9 aliases, 9**9 (387 million)
#: strings once expanded. Before the bound it took 65 s and 2.3 GB, then a MemoryError, while
#: the validator formatted the expanded value into its message.
BOMB = """\
profile: tiny
seed:
  - &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
  - &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
  - &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
  - &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
  - &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
  - &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
  - &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
  - &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
  - [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def _file(tmp_path, text, name="params.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_alias_bomb_is_refused_in_one_line_before_it_is_built(tmp_path):
    path = _file(tmp_path, BOMB)
    assert len(path.read_bytes()) < 600
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as err:
            load_params(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert f"more than {MAX_YAML_VALUES} values once its aliases are expanded" in message
    assert str(path) in message and "\n" not in message and len(message) < 300
    assert peak < 20 * 2**20  # the composed document only: nothing expanded


def test_the_bomb_is_one_line_from_the_cli(tmp_path, capsys):
    assert main(["run", str(_file(tmp_path, BOMB))]) == 2
    err = capsys.readouterr().err
    assert "more than 100000 values" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_aliases_within_the_bound_still_work(tmp_path):
    path = _file(tmp_path, "profile: tiny\nproposer: &g {max_steps: 3, epochs: 2}\n"
                           "solver: *g\ntransfer:\n  <<: *g\n  max_steps: 5\n")
    cfg = load_params(str(path))
    assert (cfg.proposer.max_steps, cfg.solver.max_steps, cfg.transfer.max_steps) == (3, 3, 5)
    assert cfg.solver.epochs == cfg.transfer.epochs == 2


def test_a_value_count_just_past_the_bound_is_refused(tmp_path):
    width = 1000  # 1000 lists of 1000 scalars through one alias: 1,001,001 values
    text = f"seeds: &row [{', '.join(['0'] * width)}]\narms: [{', '.join(['*row'] * width)}]\n"
    with pytest.raises(ConfigError, match="values once its aliases are expanded"):
        read_params_file(_file(tmp_path, text))
    fits = f"seeds: [{', '.join(map(str, range(MAX_YAML_VALUES // 2)))}]\n"
    assert len(read_params_file(_file(tmp_path, fits, "fits.yaml"))["seeds"]) == \
        MAX_YAML_VALUES // 2


@pytest.mark.parametrize("text, why", [
    ("seed: &a [1, *a]\n", "an alias names a value that contains it"),
    ("seed: " + "[" * 5000 + "]" * 5000 + "\n", f"more than {MAX_YAML_DEPTH} levels deep"),
    ("seed: " + "[" * (MAX_YAML_DEPTH + 1) + "]" * (MAX_YAML_DEPTH + 1) + "\n",
     f"more than {MAX_YAML_DEPTH} levels deep"),
    ("a: &x [" + "[" * 40 + "]" * 40 + "]\nb: " + "[" * 30 + "*x" + "]" * 30 + "\n",
     f"more than {MAX_YAML_DEPTH} levels deep"),  # shallow alone, too deep where aliased
    ("? [a, b]\n: 1\n", "a key must be a single value"),
])
def test_self_reference_and_deep_nesting_are_refused_in_one_line(tmp_path, text, why):
    with pytest.raises(ConfigError, match=why) as err:
        read_params_file(_file(tmp_path, text))
    assert "\n" not in str(err.value)


def test_an_oversized_file_is_refused_without_being_read(tmp_path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as fh:
        fh.truncate(64 * 2**30)  # 64 GiB, sparse: reading it would never end
    with pytest.raises(ConfigError, match=f"larger than {MAX_YAML_BYTES >> 10} KiB"):
        read_params_file(path)


def test_error_messages_never_format_an_unbounded_value(tmp_path):
    long = "x" * 500_000
    with pytest.raises(ConfigError) as err:
        load_params(str(_file(tmp_path, yaml.safe_dump({"seed": long}))))
    assert len(str(err.value)) < 300 and "..." in str(err.value)
    shared = ["lol"] * 9  # a bomb built in Python (a notebook's dict): shared, never expanded
    for _ in range(8):
        shared = [shared] * 9
    for params in ({"seed": shared}, {"seeds": shared}, {"warm_start": {"mode": shared}},
                   {"warm_start": shared}, {"proposer": {"max_steps": {"a": shared}}}):
        with pytest.raises(ConfigError) as err:
            load_params(params)
        assert len(str(err.value)) < 400, params.keys()
    with pytest.raises(ConfigError) as err:
        read_params_file(_file(tmp_path, f"? {long}\n: 1\n? {long}\n: 2\n", "dup.yaml"))
    assert "given twice" in str(err.value) and len(str(err.value)) < 300
    with pytest.raises(ConfigError) as err:  # a syntax error: one short line, where it is
        read_params_file(_file(tmp_path, f"seed: [{long}\n", "syntax.yaml"))
    assert "(line 2, column 1)" in str(err.value) and "\n" not in str(err.value)
    assert len(str(err.value)) < 400
