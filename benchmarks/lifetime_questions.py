"""Iteration 1's questions under both engine lifetimes (issue 26): do they match?

``run`` (GPU, vLLM): the params' arm (default the baseline, seed 0) through iteration 1's proposer
phase and curriculum generation under ``--lifetime run|stage``, stopping before scoring (the
questions exist then; scoring would not change them). It keeps ``generated.jsonl`` and the
proposer's TRL log (``proposer_train.json``) in ``--out/<lifetime>/``::

    python benchmarks/lifetime_questions.py run params/gpu-small/main_table.yaml \\
        --lifetime stage --work /tmp/lq --out $OUT/lifetime_questions
    python benchmarks/lifetime_questions.py run ... --lifetime run ...

``compare`` (CPU): the two folders' generations side by side: how many generations are equal
(text and parsed question), the first one that differs, the valid counts, Self-BLEU and Vendi
(MiniLM) of the valid questions, and the proposer's GRPO log per step (where the two phases'
rollouts part: the first step whose reward or loss differs says that training, not generation,
changed the sampling order). Written as JSON::

    python benchmarks/lifetime_questions.py compare DIR/stage DIR/run --out FILE.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

logger = logging.getLogger("lifetime_questions")

#: the GRPO log's fields compared step by step
LOG_KEYS = ("reward", "loss", "completions/mean_length", "entropy")


class _Stop(Exception):
    """Raised by the stage hook once the questions are written."""


def run(params: str, lifetime: str, arm: str, seed: int, work: Path, out: Path) -> Path:
    """Iteration 1 up to the questions; returns ``out/<lifetime>``."""
    from vdlib.config import layout
    from vdlib.config.experiment import load_params, to_dict
    from vdlib.loop import coevolution
    from vdlib.loop.arms import arm_params

    base = to_dict(load_params(params))
    base.update(seed=seed, iterations=1, output_dir=str(work / lifetime))
    base["engine"] = {**base["engine"], "lifetime": lifetime}
    cfg = load_params(arm_params(base, arm))

    def on_stage(t: int, stage: str) -> None:
        if stage == "score":
            raise _Stop

    try:
        coevolution.run(cfg, on_stage=on_stage, force=True)
    except _Stop:
        pass
    it = layout.iteration_dir(layout.run_path(cfg), 1)
    dest = out / lifetime
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("generated.jsonl", "proposer_train.json", "timing.json"):
        if (it / name).exists():
            shutil.copy2(it / name, dest / name)
    logger.info("%s: iteration 1's questions in %s", lifetime, dest)
    return dest


def _records(folder: Path) -> list[dict[str, Any]]:
    path = folder / "generated.jsonl"
    if not path.exists():  # as committed under benchmarks/results/: gzipped
        path = folder / "generated.jsonl.gz"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(x) for x in fh if x.strip()]


def _log(folder: Path) -> list[dict[str, Any]]:
    path = folder / "proposer_train.json"
    if not path.exists():
        return []
    hist = json.loads(path.read_text())["log_history"]
    return [{k: h[k] for k in LOG_KEYS if k in h} for h in hist if "reward" in h or "loss" in h]


def diversity(questions: list[str], embedder: str | None = "minilm") -> dict[str, Any]:
    """Self-BLEU and (with ``embedder``) Vendi of ``questions``, as the loop's metrics stage."""
    from vdlib.metrics import diversity as div

    out: dict[str, Any] = {"valid": len(questions),
                           "self_bleu": div.self_bleu(questions) if len(questions) > 1 else None}
    if embedder and len(questions) > 1:
        from vdlib.metrics.embeddings import embed

        out["vendi"] = div.vendi_score(embed(questions, embedder))
    return out


def compare(a: Path, b: Path, embedder: str | None = "minilm") -> dict[str, Any]:
    """The two folders' generations and proposer logs, side by side (pure apart from
    the embedder)."""
    ra, rb = _records(a), _records(b)
    n = min(len(ra), len(rb))
    same_text = [ra[i]["text"] == rb[i]["text"] for i in range(n)]
    same_q = [ra[i]["question"] == rb[i]["question"] for i in range(n)]
    first = next((i for i, s in enumerate(same_text) if not s), None)
    la, lb = _log(a), _log(b)
    steps = [{"step": i + 1, a.name: x, b.name: y, "equal": x == y}
             for i, (x, y) in enumerate(zip(la, lb, strict=False))]
    first_step = next((s["step"] for s in steps if not s["equal"]), None)
    valid = {f.name: [r["question"] for r in rs if r["valid"]] for f, rs in ((a, ra), (b, rb))}
    return {
        "generations": [len(ra), len(rb)],
        "equal_text": sum(same_text), "equal_question": sum(same_q),
        "first_different_generation": first,
        "proposer_log_steps": steps, "first_different_proposer_step": first_step,
        "diversity": {name: diversity(qs, embedder) for name, qs in valid.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="iteration 1 up to the questions (GPU)")
    r.add_argument("params", nargs="?", default="params/gpu-small/main_table.yaml")
    r.add_argument("--lifetime", choices=("run", "stage"), required=True)
    r.add_argument("--arm", default="baseline")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--work", default="/tmp/lifetime_questions")
    r.add_argument("--out", required=True)
    c = sub.add_parser("compare", help="two folders side by side (CPU)")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--embedder", default="minilm", help="'none' skips Vendi")
    c.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.cmd == "run":
        run(args.params, args.lifetime, args.arm, args.seed, Path(args.work), Path(args.out))
        return 0
    result = compare(Path(args.a), Path(args.b),
                     None if args.embedder == "none" else args.embedder)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    logger.info("equal generations %d of %s; first different %s; first different proposer "
                "step %s", result["equal_text"], result["generations"],
                result["first_different_generation"], result["first_different_proposer_step"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
