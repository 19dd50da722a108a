"""Tiny-profile format warm-start: a brief SFT of the base model on both roles' formats.

A 135M model rarely writes R-Zero's ``<question>...</question>`` then ``\\boxed{answer}`` format at
temperature 1.0, and as a solver it rarely reaches a ``\\boxed{}`` answer within the tiny
profile's token budget, so GRPO would see almost only failed rollouts and empty curricula. For
the ``tiny`` profile only, both roles start from one checkpoint (as in R-Zero) fine-tuned for
``steps`` optimizer steps on short reasoning-gym ``gsm_symbolic`` problems, alternating
proposer examples (the paper's proposer prompt -> ``<question>\\n{problem}\\n</question>\\n\\n
\\boxed{answer}``) and solver examples (the solver prompt with the problem -> its short worked
solution and ``The final answer is \\boxed{answer}.``), loss on the targets only. The
checkpoint is built once and cached under ``<cache_dir>/warm_start/<key>/`` (key = hash of the
base model and the settings). It is off
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

from vdlib.config.experiment import WarmStartConfig
from vdlib.engines.models import default_cache_dir, load_model
from vdlib.method.prompts import proposer_prompt, solver_prompt

__all__ = ["format_examples", "warm_start_dir", "sft", "target_loss", "batch_loss",
           "trainable_parameters"]

logger = logging.getLogger(__name__)


_SUFFIXES = ("Give the result as your final answer. Do not include units.",
             "Give your answer as a single number.", "Give only the result as your final answer.")


def _clean(question: str) -> str:
    for s in _SUFFIXES:
        question = question.replace(s, "")
    return question.strip()


PACKAGED = Path(__file__).parents[1] / "data" / "warm_start_examples.json"
#: (examples, seed) pairs stored in PACKAGED (machines without reasoning-gym, e.g. the GPU
#: machines, whose package sets cannot include it): regenerate with ``write_packaged()``.
PACKAGED_KEYS = tuple((64, s) for s in range(5))


def format_examples(n: int, seed: int = 0, max_words: int = 45,
                    max_cot_words: int = 60) -> list[tuple[str, str, str]]:
    """``n`` short (question, answer, worked solution) triples from reasoning-gym
    ``gsm_symbolic`` (offline, seeded): questions of at most ``max_words`` words, so a question
    fits the tiny profile's 96 new tokens, and solutions of at most ``max_cot_words`` words.
    Without reasoning-gym, the same triples come from the packaged copy when ``(n, seed)`` is
    one of :data:`PACKAGED_KEYS` (a test checks the copy equals reasoning-gym's output)."""
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        table = json.loads(PACKAGED.read_text(encoding="utf-8"))
        key = f"{n}:{seed}"
        if key in table and (max_words, max_cot_words) == (45, 60):
            return [tuple(row) for row in table[key]]
        raise ImportError(f"reasoning-gym is not installed and the packaged warm-start "
                          f"examples hold only {sorted(table)} (examples:seed); install "
                          "reasoning-gym==0.1.25") from None
    return _generate_examples(n, seed, max_words, max_cot_words)


def write_packaged(path: Path = PACKAGED) -> Path:
    """Regenerate the packaged copy of :func:`format_examples` (needs reasoning-gym)."""
    table = {f"{n}:{s}": [list(t) for t in _generate_examples(n, s, 45, 60)]
             for n, s in PACKAGED_KEYS}
    path.write_text(json.dumps(table, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _generate_examples(n: int, seed: int, max_words: int,
                       max_cot_words: int) -> list[tuple[str, str, str]]:
    import reasoning_gym

    out: list[tuple[str, str, str]] = []
    size = 8 * n
    data = reasoning_gym.create_dataset("gsm_symbolic", size=size, seed=seed)
    for item in data:
        q = _clean(item["question"])
        cot = str(item["metadata"].get("answer_cot", "")).split("####")[0].strip()
        if len(q.split()) <= max_words and 0 < len(cot.split()) <= max_cot_words:
            out.append((q, str(item["answer"]).strip(), cot))
        if len(out) == n:
            break
    return out


def _rows(tokenizer: Any, n: int, seed: int) -> list[tuple[list[int], int]]:
    """Tokenised (ids, start of target) rows: proposer and solver examples, alternating."""
    eos = tokenizer.eos_token or ""
    p_ids = tokenizer(proposer_prompt(tokenizer), add_special_tokens=False)["input_ids"]
    rows = []
    for q, a, cot in format_examples(n, seed):
        target = f"<question>\n{q}\n</question>\n\n\\boxed{{{a}}}" + eos
        rows.append((p_ids + tokenizer(target, add_special_tokens=False)["input_ids"],
                     len(p_ids)))
        s_ids = tokenizer(solver_prompt(tokenizer, q), add_special_tokens=False)["input_ids"]
        answer = f"{cot}\nThe final answer is \\boxed{{{a}}}." + eos
        rows.append((s_ids + tokenizer(answer, add_special_tokens=False)["input_ids"],
                     len(s_ids)))
    return rows


def target_loss(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                labels: torch.Tensor) -> torch.Tensor:
    """The causal-LM loss of ``model(..., labels=labels)`` (mean next-token cross-entropy over
    the positions whose label is not -100), with the output layer applied to those positions
    only: a prompt's positions need hidden states for attention but no logits, and on CPU the
    49k-wide output layer over every position was a quarter of a step's time."""
    total, count = _target_ce(model, input_ids, attention_mask, labels)
    return total / count


def _target_ce(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               labels: torch.Tensor) -> tuple[torch.Tensor, int]:
    hidden = model.base_model(input_ids=input_ids,
                              attention_mask=attention_mask).last_hidden_state[:, :-1]
    target = labels[:, 1:]
    keep = target != -100
    logits = model.get_output_embeddings()(hidden[keep])
    ce = torch.nn.functional.cross_entropy(logits.float(), target[keep], reduction="sum")
    return ce, int(keep.sum())


def _padded(rows: list[tuple[list[int], int]], pad: int, device: Any) -> tuple[torch.Tensor, ...]:
    """Right-padded ids, attention mask and labels (-100 outside the targets) of (ids, start)
    rows."""
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (ids, start) in enumerate(rows):
        input_ids[r, : len(ids)] = torch.tensor(ids)
        labels[r, start: len(ids)] = torch.tensor(ids[start:])
        attn[r, : len(ids)] = 1
    return input_ids.to(device), attn.to(device), labels.to(device)


def batch_loss(model: Any, rows: list[tuple[list[int], int]], prefix: list[int], pad: int,
               device: Any) -> torch.Tensor:
    """:func:`target_loss` of the right-padded batch of (ids, start) rows, with the rows whose
    prompt is ``prefix`` (the proposer prompt, 212 of a proposer row's ~280 tokens) sharing
    one forward pass of it: its KV cache, computed once with gradients, is repeated for them
    and their targets attend to it, so the loss and its gradient are the padded batch's (up to
    the order of float sums; tests/test_coevolution.py compares them), at about two thirds of
    the tokens of a half-proposer batch."""
    from vdlib.engines.generation import cache_kwarg, empty_cache

    def prompted(row: tuple[list[int], int]) -> bool:
        return len(prefix) > 1 and row[1] == len(prefix) and row[0][: row[1]] == prefix

    shared = [r for r in rows if prompted(r)]
    rest = [r for r in rows if not prompted(r)]
    total = torch.zeros((), device=device)
    count = 0
    if rest:
        s, n = _target_ce(model, *_padded(rest, pad, device))
        total, count = total + s, count + n
    if shared:
        key = cache_kwarg(model.base_model)
        cache = empty_cache(model)
        head = model.base_model(input_ids=torch.tensor([prefix], device=device),
                                use_cache=True, **{key: cache}).last_hidden_state
        cache.batch_repeat_interleave(len(shared))
        targets = [ids[start:] for ids, start in shared]
        width = max(map(len, targets))
        t_ids = torch.full((len(shared), width), pad, dtype=torch.long, device=device)
        t_mask = torch.zeros((len(shared), width), dtype=torch.long, device=device)
        for r, t in enumerate(targets):
            t_ids[r, : len(t)] = torch.tensor(t, device=device)
            t_mask[r, : len(t)] = 1
        attn = torch.cat([torch.ones((len(shared), len(prefix)), dtype=torch.long,
                                     device=device), t_mask], dim=1)
        positions = (len(prefix) + torch.arange(width, device=device)).expand(len(shared), -1)
        hidden = model.base_model(input_ids=t_ids, attention_mask=attn, position_ids=positions,
                                  use_cache=True, **{key: cache}).last_hidden_state
        # target token j is predicted at position j - 1: the prompt's last one for the first
        preds = torch.cat([head[:, -1:].expand(len(shared), -1, -1), hidden[:, :-1]], dim=1)
        keep = t_mask.bool()
        logits = model.get_output_embeddings()(preds[keep])
        total = total + torch.nn.functional.cross_entropy(logits.float(), t_ids[keep],
                                                          reduction="sum")
        count += int(keep.sum())
    return total / count


def trainable_parameters(model: Any, top_layers: int = 0) -> list[torch.nn.Parameter]:
    """The parameters the warm-start trains: all of them (``top_layers`` 0), or the last
    ``top_layers`` decoder layers (every layer of a model with fewer) and the final norm, every
    other weight frozen (``requires_grad`` False: no gradient flows below the lowest trained
    layer, which is where the time goes). A model without ``model.layers`` / ``model.norm`` is
    refused."""
    if not top_layers:
        return list(model.parameters())
    inner = getattr(model, "model", None)
    layers, norm = getattr(inner, "layers", None), getattr(inner, "norm", None)
    if layers is None or norm is None:
        raise ValueError(f"warm_start.train_layers: {type(model).__name__} has no "
                         "model.layers / model.norm; use 0 (train every weight)")
    model.requires_grad_(False)
    keep = [*layers[max(0, len(layers) - top_layers):], norm]
    for module in keep:
        module.requires_grad_(True)
    return [p for module in keep for p in module.parameters()]


def sft(model: Any, tokenizer: Any, cfg: WarmStartConfig, seed: int = 0) -> list[float]:
    """Fine-tune ``model`` in place on the proposer format; returns the loss per step."""
    rows = _rows(tokenizer, cfg.examples, seed)
    prefix = tokenizer(proposer_prompt(tokenizer), add_special_tokens=False)["input_ids"]
    device = next(model.parameters()).device
    params = trainable_parameters(model, cfg.train_layers)
    opt = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    for _ in tqdm(range(cfg.steps), desc="format warm-start", unit="step"):
        idx = torch.randint(len(rows), (cfg.batch_size,), generator=gen).tolist()
        batch = [rows[i] for i in idx]
        loss = batch_loss(model, batch, prefix, tokenizer.pad_token_id or 0, device)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    model.eval()
    model.requires_grad_(True)
    return losses


def warm_start_dir(base_model: str, cfg: WarmStartConfig, *, seed: int = 0,
                   cache_dir: str | Path | None = None, dtype: str = "float32",
                   device: str = "cpu", check: bool = True) -> Path:
    """Path of the warm-started proposer checkpoint for ``base_model``, built once and cached
    with a record of its files (:data:`vdlib.runs.run_state.FOLDER_RECORD`). With ``check`` (the
    default) a cached folder is checked against its record first and built again if it does
    not match (:func:`vdlib.runs.run_state.verified_build_dir`); without it (the other ranks of a
    multi-process run, after the main one checked it) it is used as it is."""
    from vdlib.runs.run_state import FOLDER_RECORD, verified_build_dir

    settings = {"base": base_model, "examples": cfg.examples, "steps": cfg.steps,
                "batch_size": cfg.batch_size, "lr": cfg.learning_rate, "seed": seed, "v": 4}
    if cfg.train_layers:  # absent when 0, so that earlier cached warm-starts keep their key
        settings["train_layers"] = cfg.train_layers
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    target = root / "warm_start" / f"{Path(base_model).name}-{key}"
    if not check and (target / FOLDER_RECORD).is_file():
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

    return verified_build_dir(target, build, f"the format warm-start of {base_model}")
