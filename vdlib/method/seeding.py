"""Deterministic seed derivation: one run seed -> independent seeds for every batch and phase.

``derive_seed(run_seed, *parts)`` hashes its arguments (BLAKE2b over their ``repr``) into a
63-bit integer, so it is identical on every machine, process and rank, and independent of
Python's hash randomisation. Use it for sampling seeds per generation batch and (issue
"Vocabulary dropout") for the mask seed of each (iteration, phase, step / batch).

>>> derive_seed(0, "gen", 3) == derive_seed(0, "gen", 3)
True
>>> derive_seed(0, "gen", 3) != derive_seed(0, "gen", 4)
True
>>> derive_seed(0, "gen", 3)
5054711896563818350
"""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]

_MASK63 = (1 << 63) - 1


def derive_seed(run_seed: int, *parts: int | str) -> int:
    """A seed in ``[0, 2**63)`` determined by ``run_seed`` and the ordered ``parts``."""
    key = repr((int(run_seed),) + tuple(parts)).encode("utf-8")
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") & _MASK63
