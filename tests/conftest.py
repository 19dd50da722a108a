"""Shared test setup: no network, and session-scoped tiny model / tokenizer fixtures."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers / huggingface_hub are imported
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"


def _threads_per_worker() -> int | None:
    """The CPU threads each pytest-xdist worker may use: the cores shared out among the workers
    (None outside xdist). torch and OpenMP otherwise start one thread per core in every worker
    and in every process a test spawns (notebook kernels, arm workers), so two workers on 2 cores
    run 4+ spinning threads: measured on 2 cores (AMD Zen 3, 2026-12-02), four torch-heavy test
    files under `-n 2` took 302 s with the default threads and 127 s with one a worker."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return None
    return max(1, (os.cpu_count() or 1) // max(1, int(workers)))


if (_n := _threads_per_worker()) is not None:  # before torch is imported; spawned processes inherit
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, str(_n))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_and_tokenizer():
    """Seeded random 2-layer Llama (padded vocab) with SmolLM2's tokenizer; eval mode, CPU."""
    from vdlib.engines.models import load_model

    return load_model("tiny-random")


@pytest.fixture(scope="session")
def tokenizer():
    """SmolLM2's tokenizer (left padding), the one the tiny and packaged models use."""
    from vdlib.engines.models import load_tokenizer

    return load_tokenizer("tiny-random")


#: the test files that take longest (2 cores, 2026-11-29: the notebooks' ~420 s with two
#: workers, then the run-folder damage tests and the loop's), collected first, so that under
#: `make test`'s two workers (--dist loadfile, files handed out in collection order) the longest
#: file starts at once beside the rest instead of last, after everything else has finished
LONGEST_FIRST = ("test_notebooks.py", "test_reliability.py", "test_coevolution.py")


def pytest_collection_modifyitems(session, config, items):
    def rank(item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file's own order, and the others', kept
