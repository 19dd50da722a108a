"""Tiny-profile format warm-start: a brief SFT of the proposer on well-formatted questions.

A 135M model rarely writes R-Zero's ``<question>...</question>`` then ``\\boxed{answer}`` format at
temperature 1.0, so proposer GRPO would see almost only failed rollouts (reward = failure value
for all G samples: zero advantage, no learning). For the ``tiny`` profile only, the proposer
starts from a checkpoint fine-tuned for ``steps`` optimizer steps on reasoning-gym
``gsm_symbolic`` problems rendered as proposer outputs (prompt = the paper's proposer prompt;
target = ``<question>\\n{problem}\\n</question>\\n\\n\\boxed{answer}`` + EOS; loss on the target
tokens only). The checkpoint is built once and cached under
``<cache_dir>/warm_start/<key>/`` (key = hash of the base model and the settings). It is off
(``warm_start.mode: none``) in the paper profile: Qwen3-4B-Base follows the format unaided.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from vdlib.config import WarmStartConfig
from vdlib.models import atomic_build_dir, default_cache_dir, load_model
from vdlib.prompts import proposer_prompt

__all__ = ["format_examples", "warm_start_dir", "sft"]

logger = logging.getLogger(__name__)


def format_examples(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (question, answer) pairs from reasoning-gym ``gsm_symbolic`` (offline, seeded)."""
    import reasoning_gym

    data = reasoning_gym.create_dataset("gsm_symbolic", size=n, seed=seed)
    return [(item["question"].strip(), str(item["answer"]).strip()) for item in data]


def _target(question: str, answer: str) -> str:
    return f"<question>\n{question}\n</question>\n\n\\boxed{{{answer}}}"


def sft(model: Any, tokenizer: Any, cfg: WarmStartConfig, seed: int = 0) -> list[float]:
    """Fine-tune ``model`` in place on the proposer format; returns the loss per step."""
    prompt = proposer_prompt(tokenizer)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token or ""
    rows = []
    for q, a in format_examples(cfg.examples, seed):
        target_ids = tokenizer(_target(q, a) + eos, add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids + target_ids, len(prompt_ids)))
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    for _ in tqdm(range(cfg.steps), desc="format warm-start", unit="step"):
        idx = torch.randint(len(rows), (cfg.batch_size,), generator=gen).tolist()
        batch = [rows[i] for i in idx]
        width = max(len(ids) for ids, _ in batch)
        pad = tokenizer.pad_token_id or 0
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for r, (ids, start) in enumerate(batch):
            input_ids[r, : len(ids)] = torch.tensor(ids)
            labels[r, start: len(ids)] = torch.tensor(ids[start:])
            attn[r, : len(ids)] = 1
        out = model(input_ids=input_ids.to(device), attention_mask=attn.to(device),
                    labels=labels.to(device))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(out.loss))
    model.eval()
    return losses


def warm_start_dir(base_model: str, cfg: WarmStartConfig, *, seed: int = 0,
                   cache_dir: str | Path | None = None, dtype: str = "float32",
                   device: str = "cpu") -> Path:
    """Path of the warm-started proposer checkpoint for ``base_model``, built once and cached."""
    settings = {"base": base_model, "examples": cfg.examples, "steps": cfg.steps,
                "batch_size": cfg.batch_size, "lr": cfg.learning_rate, "seed": seed, "v": 1}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    target = root / "warm_start" / f"{Path(base_model).name}-{key}"
    if (target / "config.json").exists():
        return target

    def build(tmp: Path) -> None:
        model, tok = load_model(base_model, dtype=dtype, device=device, cache_dir=cache_dir)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            losses = sft(model, tok, cfg, seed)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "warm_start.json").write_text(json.dumps({**settings, "losses": losses},
                                                        indent=2))
        logger.info("format warm-start: loss %.3f -> %.3f", losses[0], losses[-1])

    return atomic_build_dir(target, build)
