"""A run's configuration and where it lives on disk.

- :mod:`~vdlib.config.experiment`: ``load_params`` (strict YAML, overrides), validation, profile
  presets, ``describe``, ``save_params``; it re-exports every section, and this package
  re-exports its public names (``from vdlib.config import load_params``);
- :mod:`~vdlib.config.config_sections`, :mod:`~vdlib.config.config_runtime`,
  :mod:`~vdlib.config.config_evaluation`, :mod:`~vdlib.config.config_fields`: the typed sections
  (protocol; engine, launcher, tracking; evaluation and verification), ``param()`` and the
  source citations;
- :mod:`~vdlib.config.config_yaml`: bounded, strict YAML reading, ``ConfigError``;
- :mod:`~vdlib.config.model_names`: the registered model names, as data (the engines register
  a loader for each);
- :mod:`~vdlib.config.arm_table`: the arms' table (name -> overrides);
- :mod:`~vdlib.config.layout`: every run path and run id;
- :mod:`~vdlib.config.mask_settings`: a config as the method's plain mask values
  (``mask_schedule(cfg)``, ``mask_spec(cfg)``; the method never reads a config).

May import: :mod:`vdlib.method`, :mod:`vdlib.utils`; nothing of :mod:`vdlib.engines` (model
names are its own data). Importing it and ``load_params`` stay light: no torch, datasets or vLLM.
"""

from vdlib.config.experiment import *  # noqa: F403 - the names vdlib.config always had
from vdlib.config.experiment import __all__  # noqa: F401
