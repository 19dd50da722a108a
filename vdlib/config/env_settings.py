"""The environment variables that tune vdlib (heartbeat, deadline, waits, ports, workers): each
with its type, range and meaning in :data:`ENV_SETTINGS`, read by :func:`env_number`, and all
checked at once by :func:`check_environment` (``vdlib`` runs it before any command, so a bad value
is one line naming the variable and what is allowed, never a traceback from a worker thread).

An empty value is the same as an unset one.

>>> env_number("VDLIB_HEARTBEAT_S", {"VDLIB_HEARTBEAT_S": "5"})
5.0
>>> env_number("VDLIB_HEARTBEAT_S", {"VDLIB_HEARTBEAT_S": "inf"})
Traceback (most recent call last):
...
vdlib.config.config_yaml.ConfigError: VDLIB_HEARTBEAT_S = 'inf' is not allowed; allowed: ...
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from vdlib.config.config_yaml import ConfigError, shown

__all__ = ["EnvSetting", "ENV_SETTINGS", "env_number", "env_number_or_default",
           "check_environment"]


@dataclass(frozen=True)
class EnvSetting:
    """One numeric environment setting: integer or not, its range, its default (None: unset
    means "not used" or "chosen by vdlib") and its meaning."""

    integer: bool
    low: float
    high: float
    default: float | None
    meaning: str

    def allowed(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        return f"{kind}, {self.low:g} to {self.high:g} ({self.meaning})"


ENV_SETTINGS: dict[str, EnvSetting] = {
    "VDLIB_HEARTBEAT_S": EnvSetting(False, 0, 86400, 30.0, "seconds between a stage's heartbeat "
                                    "lines; 0 = none"),
    "VDLIB_STOP_AT": EnvSetting(False, 0, 1e11, None, "epoch seconds after which no stage "
                                "starts; vdlib run --stop-after sets it"),
    "VDLIB_WAIT_TIMEOUT_S": EnvSetting(False, 1, 30 * 86400, 48 * 3600.0, "seconds a rank waits "
                                       "for the others at a barrier"),
    "VDLIB_GRID_PORT_BASE": EnvSetting(True, 1024, 65000, 29600, "the first of the grid's "
                                       "per-slot rendezvous ports"),
    "VDLIB_VOTE_WORKERS": EnvSetting(True, 1, 256, None, "majority-vote grading threads; unset: "
                                     "a quarter of the CPU cores, 1 to 8"),
}


def env_number(name: str, environ: Mapping[str, str] | None = None) -> float | int | None:
    """The value of environment setting ``name`` (:data:`ENV_SETTINGS`), its default when unset
    or empty; a :class:`ConfigError` naming the variable and what is allowed otherwise."""
    setting = ENV_SETTINGS[name]
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return None if setting.default is None else (
            int(setting.default) if setting.integer else float(setting.default))
    value: float | int | None
    try:
        value = int(raw) if setting.integer else float(raw)
    except ValueError:  # not a number (or an integer of more digits than Python converts)
        value = None
    if value is None or not math.isfinite(value) or not setting.low <= value <= setting.high:
        raise ConfigError(f"{name} = {shown(raw)} is not allowed; allowed: {setting.allowed()}; "
                          f"unset it for the default")
    return value


def env_number_or_default(name: str) -> float | int | None:
    """:func:`env_number`, but a bad value is logged as a warning and the default used (for
    library calls, e.g. a notebook's; ``vdlib`` has refused it already)."""
    try:
        return env_number(name)
    except ConfigError as e:
        logging.getLogger(__name__).warning("%s; using the default", e)
        default = ENV_SETTINGS[name].default
        return None if default is None else (int(default) if ENV_SETTINGS[name].integer
                                             else float(default))


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Check every setting of :data:`ENV_SETTINGS` that is set (the first bad one raises)."""
    for name in ENV_SETTINGS:
        env_number(name, environ)
