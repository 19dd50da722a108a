"""The CPU threads of `make test`'s two pytest-xdist workers: one each (tests/conftest.py's rule)
against torch's default of one per core in every worker, on the same test files, in one run.

    python benchmarks/xdist_threads.py [TEST_FILE ...]

Each setting runs ``pytest -q -n 2 --dist loadfile FILES`` once (the rule's run last, so the
default's run cannot profit from a warmer page cache) and the script prints both wall times and
their ratio. Run it through an environment without PYTHONDONTWRITEBYTECODE (as `make` does),
or every process compiles every module it imports. Results:
benchmarks/results/xdist_threads_zen3.txt.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = ("tests/test_walkthrough_notebook.py", "tests/test_trainer.py",
                 "tests/test_kl_cov_fidelity.py", "tests/test_generation.py")
logger = logging.getLogger("xdist_threads")


def timed(files: list[str], threads: int | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if threads is not None:  # an explicit value wins over the conftest's setdefault
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                    "--dist", "loadfile", *files], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    files = argv or list(DEFAULT_FILES)
    cores = os.cpu_count() or 1
    default = timed(files, cores)  # torch's default: one thread per core in each worker
    rule = timed(files, None)      # tests/conftest.py: the cores shared out among the workers
    logger.info("%d cores, 2 workers, %s", cores, " ".join(files))
    logger.info("one thread per core a worker: %.0f s", default)
    logger.info("cores / workers threads a worker (conftest): %.0f s", rule)
    logger.info("ratio default / rule: %.2f", default / rule)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
