"""The YAML form of configs: bounded, strict reading of a params file or a run's ``config.yaml``
(:func:`read_yaml_file`, :func:`read_params_file`: size, alias expansion and depth bounded, a
key given twice refused) and the text a run's ``config.yaml`` holds (:func:`config_text`).
Re-exported by :mod:`vdlib.config`; it imports no other vdlib module, so :mod:`vdlib.config.layout`
can use it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from vdlib.utils import safe_read

__all__ = ["ConfigError", "read_yaml_file", "read_params_file", "config_text",
           "MAX_YAML_BYTES", "MAX_YAML_VALUES", "MAX_YAML_DEPTH", "shown", "not_regular_file"]


class ConfigError(ValueError):
    """Invalid parameters. The message names the dotted key and what is allowed."""


def shown(value: Any) -> str:
    """``value`` as an error message shows it: its ``repr``, cut short (a long string, a long
    or deep list or mapping: ``...``), so that no message formats an unbounded value.

    >>> shown([[1, 2]] * 1000)
    '[[1, 2], [1, 2], [1, 2], [1, 2], [1, 2], [1, 2], ...]'
    >>> len(shown("x" * 10**6)) < 100
    True
    """
    import reprlib

    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother, short.maxlong = 2, 80, 80, 40
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = 6
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 10_000:
        return f"<an integer of about {int(value.bit_length() * 0.30103):,} digits>"
    try:
        text = short.repr(value)
    except ValueError:  # e.g. an integer too long for str() inside a list
        return f"<a {type(value).__name__} too large to show>"
    return text if len(text) <= 120 else text[:57] + "..." + text[-60:]


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping, and turns a value PyYAML
    cannot build (an integer of more digits than Python converts, a date that does not exist)
    into a :class:`ConfigError` naming its key."""


class _BadValue(ConfigError):
    """A scalar PyYAML recognised but could not build; each enclosing mapping adds its key as
    the error travels out, so that the message names the dotted key."""

    def __init__(self, node: yaml.Node, problem: str) -> None:
        super().__init__(problem)
        self.at, self.keys, self.problem = node, [], problem
        self.line, self.text = node.start_mark.line + 1, str(node.value)

    def __str__(self) -> str:
        if not self.keys:
            return f"line {self.line}: {shown(self.text)} {self.problem}"
        key = "".join(k if k.startswith("[") else f".{k}" for k in self.keys).lstrip(".")
        return f"{key} = {shown(self.text)} {self.problem}"


#: the most digits an integer may have (CPython converts at most 4300 by default; no key of
#: vdlib takes a number that long)
MAX_INT_DIGITS = 100


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
    digits = sum(c.isdigit() for c in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise _BadValue(node, f"is an integer of {digits:,} digits; allowed: at most "
                        f"{MAX_INT_DIGITS} digits (every numeric key has a range)")
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except (ValueError, OverflowError) as e:
        raise _BadValue(node, f"is not an integer ({e})") from None


def _construct_timestamp(loader: _StrictLoader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError) as e:
        raise _BadValue(node, f"is not a date that exists ({e}); no key takes a date: quote "
                        "text, or write a number") from None


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


#: Bounds on a YAML file vdlib reads (a params file, a run's ``config.yaml``): its size, and how
#: many values it holds and how deeply they nest once every alias is expanded. An alias bomb (a
#: few hundred bytes that expand to billions of values) is refused before it is built.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 64


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a composed YAML document whose values, every alias expanded, number more than
    :data:`MAX_YAML_VALUES` or nest deeper than :data:`MAX_YAML_DEPTH`, or that holds an alias
    inside the value it names. Each node is visited once (aliases share nodes)."""
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) once expanded
    active: set[int] = set()

    def walk(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in done:
            return done[key]
        if key in active:
            raise ConfigError(f"line {node.start_mark.line + 1}: an alias names a value that "
                              "contains it; write the values out")
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"values nest more than {MAX_YAML_DEPTH} levels deep")
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        active.add(key)
        values, height = 1, 1
        for child in children:
            n, h = walk(child, depth + 1)
            values, height = values + n, max(height, h + 1)
            if values > MAX_YAML_VALUES:
                raise ConfigError(f"more than {MAX_YAML_VALUES} values once its aliases are "
                                  "expanded (an alias bomb?); write the values out")
        if depth + height > MAX_YAML_DEPTH + 1:
            raise ConfigError(f"values nest more than {MAX_YAML_DEPTH} levels deep")
        active.discard(key)
        done[key] = (values, height)
        return done[key]

    walk(root, 1)


def read_yaml_file(path: str | os.PathLike, what: str = "params file") -> Any:
    """The data of YAML file ``path`` (None if empty), read within bounds: at most
    :data:`MAX_YAML_BYTES`, at most :data:`MAX_YAML_VALUES` values nested at most
    :data:`MAX_YAML_DEPTH` deep with every alias expanded (checked on the composed document,
    before anything is built), no key given twice in one mapping, safe tags only. Anything
    else is a one-line :class:`ConfigError` naming ``what`` and ``path``."""
    path = Path(path)
    label = f"{what} {str(path)!r}"
    try:
        kind = not_regular_file(path)
        if kind:
            raise ConfigError(f"{label} is {kind}, not a regular file; save the settings to a "
                              ".yaml file and give its path")
        # vdlib's bounded reader: a FIFO swapped in after the check cannot block the read
        with safe_read.open_regular(path, follow_links=True) as (fh, _):
            raw = fh.read(MAX_YAML_BYTES + 1)
    except safe_read.UnsafeFileError:
        raise ConfigError(f"{label} is not a regular file; give the path of a .yaml file"
                          ) from None
    except OSError as e:
        raise ConfigError(f"{label} cannot be read ({e.strerror or e})") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"{label} is larger than {MAX_YAML_BYTES >> 10} KiB; a {what} "
                          "holds a few settings")
    try:
        loader = _StrictLoader(raw.decode("utf-8"))
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except ConfigError as e:
        raise ConfigError(f"{label}: {e}") from None
    except RecursionError:
        raise ConfigError(f"{label}: values nest more than {MAX_YAML_DEPTH} levels deep"
                          ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"{label} is not valid YAML: {_yaml_problem(e)}") from None
    except (ValueError, OverflowError, TypeError) as e:  # a value PyYAML cannot build
        raise ConfigError(f"{label} holds a value that cannot be read: "
                          f"{_yaml_problem(e)}") from None


def not_regular_file(path: str | os.PathLike) -> str:
    """What ``path`` is when it exists but is not a regular file (links followed): "a FIFO
    or pipe (process substitution, <(...), gives one)", "a directory", "a device", "a socket";
    "" for a regular file or a path that does not exist."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return ""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISFIFO(mode):
        return "a FIFO or pipe (a process substitution such as <(...) is one)"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "a special file"


def _yaml_problem(error: Exception) -> str:
    """A YAML or decoding error in one short line: what and where (line, column)."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        what = " ".join(x for x in (error.context, error.problem) if x) or type(error).__name__
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    else:
        what, where = (str(error) or type(error).__name__), ""
    what = " ".join(what.split())
    return (what if len(what) <= 160 else what[:157] + "...") + where


def _strict_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: later keys override it
            continue
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if isinstance(key, list | dict | set):
            raise ConfigError(f"line {line}: a key must be a single value, not "
                              f"{type(key).__name__} {shown(key)}")
        if key in seen:
            raise ConfigError(f"key {shown(key)} is given twice in one mapping (lines {seen[key]} "
                              f"and {line}); keep one")
        seen[key] = line
    try:
        return loader.construct_mapping(node, deep=deep)
    except _BadValue as e:  # name the key of the value that failed, level by level
        for key_node, value_node in node.value:
            if value_node is e.at:
                e.keys.insert(0, str(loader.construct_object(key_node, deep=deep)))
                e.at = node
                break
        raise


def _sequence(loader: _StrictLoader, node: yaml.SequenceNode) -> list:
    """A list, built at once (not deferred), so that a value that fails names its index."""
    try:
        return loader.construct_sequence(node, deep=True)
    except _BadValue as e:
        for i, item in enumerate(node.value):
            if item is e.at:
                e.keys.insert(0, f"[{i}]")
                e.at = node
                break
        raise


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)
_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def read_params_file(path: str | os.PathLike) -> dict[str, Any]:
    """The mapping in params file ``path``: a missing path, a directory, invalid YAML, a key
    given twice, a file beyond the bounds of :func:`read_yaml_file` (size, aliases), an empty
    file and a non-mapping are each a :class:`ConfigError` that says so."""
    path = Path(path)
    kind = not_regular_file(path)
    if kind == "a directory":
        raise ConfigError(f"params file {str(path)!r} is a directory; give a .yaml file in it")
    if kind:
        raise ConfigError(f"params file {str(path)!r} is {kind}, not a regular file; save the "
                          "params to a .yaml file and give its path")
    if not path.is_file():
        raise ConfigError(f"params file {str(path)!r} does not exist")
    data = read_yaml_file(path)
    if data is None:
        raise ConfigError(f"params file {str(path)!r} is empty; write at least the keys you "
                          "change (e.g. profile: tiny), or {} for the paper defaults")
    if not isinstance(data, dict):
        raise ConfigError(f"params file {str(path)!r} must hold a mapping of keys to values, "
                          f"got {type(data).__name__}")
    return data


def config_text(cfg: Any) -> str:
    """The YAML text of a run's ``config.yaml``: the resolved config (a dataclass) as plain data,
    keys in field order; ``vdlib.config.experiment.load_params`` reads it back and
    :func:`vdlib.config.experiment.save_params` writes it."""
    import dataclasses

    return yaml.safe_dump(dataclasses.asdict(cfg), sort_keys=False, allow_unicode=True)
