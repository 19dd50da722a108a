r"""The packaged SmolLM2's GGUF -> safetensors conversion (issue 31: 24 s of a cold ``make demo``):
vdlib's reader against transformers' GGUF loader (the code before), in the same run.

    python benchmarks/gguf_conversion.py [--repeats 1] [--out /tmp/gguf_conversion]

Each repeat builds the tokenizer cache entry and the model cache entry into an empty cache
folder twice, in alternating order: **before** (``AutoTokenizer`` and
``AutoModelForCausalLM.from_pretrained(gguf_file=...)`` then re-saved, as
``vdlib.engines.models`` did up to this change) and **after** (``smollm2_tokenizer_dir`` and
``smollm2_model_dir`` as they are now). Imports happen before any timing. Prints the seconds of
each (median), the ratio after / before, whether every file of the two cache entries is
byte-identical and whether every tensor is equal (``torch.equal``); they must be.
"""

from __future__ import annotations

import argparse
import copy
import filecmp
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM  # noqa: E402, F401

from vdlib.engines import models  # noqa: E402


def build_before(cache: Path) -> Path:
    """The conversion as ``vdlib.engines.models`` did it before: transformers' GGUF loader."""
    gguf = models.smollm2_gguf_path()
    tok_dir = models._smollm2_dir(cache, "-tokenizer")
    tok_dir.mkdir(parents=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok.model_max_length = 8192
    tok.save_pretrained(tok_dir)
    target = models._smollm2_dir(cache)
    src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                               dtype=torch.float32)
    config = copy.deepcopy(src.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        dst = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    dst.load_state_dict(src.state_dict(), assign=True)
    dst.tie_weights()
    dst.generation_config = copy.deepcopy(src.generation_config)
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    models.sync_special_ids(dst, tokenizer, overwrite=True)
    dst.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def build_after(cache: Path) -> Path:
    """The conversion as ``vdlib.engines.models`` does it now."""
    return models.smollm2_model_dir(cache)


def same_entries(a: Path, b: Path) -> tuple[bool, bool]:
    """(every file of both cache entries byte-identical, every tensor equal)."""
    files_equal = True
    for suffix in ("", "-tokenizer"):
        da, db = models._smollm2_dir(a, suffix), models._smollm2_dir(b, suffix)
        names = sorted(p.name for p in da.iterdir())
        files_equal &= names == sorted(p.name for p in db.iterdir())
        files_equal &= all(filecmp.cmp(da / n, db / n, shallow=False) for n in names)
    ta = load_file(models._smollm2_dir(a) / "model.safetensors")
    tb = load_file(models._smollm2_dir(b) / "model.safetensors")
    tensors_equal = set(ta) == set(tb) and all(torch.equal(ta[k], tb[k]) for k in ta)
    return files_equal, tensors_equal


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=None, help="scratch folder (default: a temporary one)")
    args = ap.parse_args(argv)
    root = Path(args.out or tempfile.mkdtemp(prefix="gguf_conversion-"))
    builders = {"before": build_before, "after": build_after}
    seconds: dict[str, list[float]] = {name: [] for name in builders}
    checks = []
    try:
        for r in range(args.repeats):
            order = list(builders) if r % 2 == 0 else list(reversed(builders))
            caches = {}
            for name in order:
                caches[name] = root / f"{name}-{r}"
                start = time.perf_counter()
                builders[name](caches[name])
                seconds[name].append(time.perf_counter() - start)
            checks.append(same_entries(caches["before"], caches["after"]))
            for cache in caches.values():
                shutil.rmtree(cache)
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)
    before, after = (statistics.median(seconds[n]) for n in ("before", "after"))
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"torch threads {torch.get_num_threads()}, repeats {args.repeats}")
    print(f"before (transformers' GGUF loader): {before:.2f} s  {seconds['before']}")
    print(f"after  (vdlib.engines.gguf_checkpoint): {after:.2f} s  {seconds['after']}")
    print(f"ratio after / before: {after / before:.3f}")
    print(f"cache files byte-identical: {all(f for f, _ in checks)}; "
          f"every tensor equal (torch.equal): {all(t for _, t in checks)}")
    return 0 if all(f and t for f, t in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
