"""vdlib: reference implementation of "Vocabulary Dropout for Curriculum Diversity in LLM
Co-Evolution".

The library holds all logic (config, models, generation, prompts, parsing, and, in later
modules, the mask, rewards, GRPO loop, evaluation and metrics); notebooks are thin drivers.
"""

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
