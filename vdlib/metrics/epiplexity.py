"""Epiplexity: learnable information in a set of questions, by prequential MDL with a LoRA observer.

Paper, App. "Epiplexity computation" (after Finzi et al. 2026, as Liu et al. 2026 applied it to
self-play curricula): a fresh LoRA observer on the loop's base model is fine-tuned on the
proposer's questions. Epoch 1 records each batch's loss *before* the update that batch makes
(the prequential code length ``L_online``); training continues for up to 20 epochs with early
stopping on a held-out validation set. With ``L_train(e)`` the total training loss after epoch
``e``, ``epiplexity(e) = (L_online - L_train(e)) / ln 2`` bits, and the MDL criterion picks the
epoch minimising ``epiplexity(e) / N_train + L_val(e) / (ln 2 * N_val)``; the reported value is
``epiplexity(best) / N_train`` in bits per token.

Hyperparameters (paper table ``tab:epiplexity_hypers``) are the defaults of :func:`epiplexity`:
LoRA r 16, alpha 32, dropout 0.05 on q/k/v/o and gate/up/down projections, max length 512,
batch 64, AdamW lr 1e-4 and weight decay 0.01, 20 epochs, patience 5, 10% validation, questions
of at least 20 characters, bfloat16 (here: on CUDA; float32 on CPU unless ``dtype`` is given).

Interpretations where the appendix leaves a choice (stated so runs can be compared):

1. Filtering: a question is kept when its whitespace-stripped text has >= ``min_chars``
   characters; duplicates are kept (repetition is part of what the observer can learn).
2. Split: a permutation seeded by ``seed`` puts ``max(1, round(val_fraction * n))`` questions in
   validation and the rest (at least one) in training.
3. Sequences: each question is coded as ``[start] + tokens(question) + [EOS]`` truncated to
   ``max_length`` tokens, where ``start`` is the tokenizer's BOS (its EOS if it has none, as for
   Qwen3 base): every question token and the closing EOS is predicted from a context, so all of
   the question's content is coded. ``N`` counts these predicted tokens.
4. Losses are sums of token cross-entropies in nats, computed in float32 from the logits.
   ``L_online`` is the sum over epoch-1 batches of each batch's training-mode loss (LoRA dropout
   active), taken from the same forward pass that produces that batch's gradient, i.e. before
   the batch's update. ``L_train(e)`` and ``L_val(e)`` are eval-mode (no dropout) totals over the
   whole training / validation set after epoch ``e``'s updates.
5. Optimisation: each step minimises the mean token cross-entropy of its batch (micro-batches
   accumulate to the same gradient); constant learning rate, no warm-up, no gradient clipping
   (none is stated). Batches are reshuffled each epoch from ``(seed, epoch)``.
6. Early stopping: training stops after ``patience`` consecutive epochs without a new lowest
   validation loss, or after ``max_epochs`` epochs (epoch 1, the prequential pass, included).
7. MDL selection is over the epochs actually run; ``N_train``/``N_val`` in the criterion are
   token counts (both terms are then bits per token). Epiplexity is reported unclipped (it can be
   negative if training made the training loss worse than the online code).

``base_model`` is a name for :func:`vdlib.engines.models.load_model` (``"tiny-random"``,
``"smollm2-135m"``, a Hub id, a folder) or a ``(model, tokenizer)`` pair; a pair's model is
returned unchanged (the LoRA layers are unloaded and parameter flags restored afterwards).
"""

from __future__ import annotations

import math
import os
import random
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from tqdm.auto import tqdm

from vdlib.utils.terminal import bars_disabled

__all__ = ["epiplexity", "encode_questions", "mdl_select", "TARGET_MODULES"]

LN2 = math.log(2.0)
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def encode_questions(questions: Sequence[str], tokenizer: Any, max_length: int) -> list[list[int]]:
    """Token ids ``[start] + question + [EOS]`` (truncated to ``max_length``) per question."""
    eos = tokenizer.eos_token_id
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else eos
    if eos is None or start is None:
        raise ValueError("epiplexity needs a tokenizer with an EOS (or BOS) token")
    if max_length < 2:
        raise ValueError(f"max_length must be >= 2, got {max_length}")
    out = []
    for q in questions:
        ids = tokenizer(q, add_special_tokens=False)["input_ids"]
        out.append([start, *ids, eos][:max_length])
    return out


def mdl_select(online_nats: float, train_nats: Sequence[float], val_nats: Sequence[float],
               n_train: int, n_val: int) -> tuple[int, list[float]]:
    """Index (0-based) of the epoch minimising ``epiplexity(e)/N_train + L_val(e)/(ln2 N_val)``
    and the criterion of every epoch (ties: the earliest epoch).

    >>> mdl_select(10.0, [8.0, 5.0, 4.0], [3.0, 2.0, 2.5], 10, 2)[0]  # 1.7, 1.5, 1.85 / ln 2
    1
    """
    scores = [(online_nats - lt) / LN2 / n_train + lv / (LN2 * n_val)
              for lt, lv in zip(train_nats, val_nats, strict=True)]
    return min(range(len(scores)), key=scores.__getitem__), scores


def _pad(seqs: list[list[int]], pad_id: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):  # right padding: positions start at 0 for every sequence
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, :len(s)] = 1
    return ids.to(device), mask.to(device)


def _sum_ce(model: Any, seqs: list[list[int]], pad_id: int, device: Any) -> torch.Tensor:
    """Summed next-token cross-entropy (nats) over the real tokens of ``seqs`` (one forward)."""
    ids, mask = _pad(seqs, pad_id, device)
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    targets = ids[:, 1:]
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                         reduction="none").view_as(targets)
    return (ce * mask[:, 1:].to(ce.dtype)).sum()


def _n_predicted(seqs: list[list[int]]) -> int:
    return sum(len(s) - 1 for s in seqs)


def _chunks(seqs: list[list[int]], size: int) -> list[list[list[int]]]:
    return [seqs[i:i + size] for i in range(0, len(seqs), size)]


def _total_loss(model: Any, seqs: list[list[int]], pad_id: int, device: Any,
                micro: int) -> float:
    model.eval()
    total = 0.0
    with torch.inference_mode():
        for chunk in _chunks(seqs, micro):
            total += float(_sum_ce(model, chunk, pad_id, device))
    return total


def _train_epoch(model: Any, optimizer: Any, batches: list[list[list[int]]], pad_id: int,
                 device: Any, micro: int, desc: str) -> float:
    """One pass of updates; returns the summed training-mode loss of each batch before its
    update (nats)."""
    model.train()
    recorded = 0.0
    for batch in tqdm(batches, desc=desc, leave=False,
                      disable=len(batches) < 8 or bars_disabled()):
        n_tokens = _n_predicted(batch)
        optimizer.zero_grad(set_to_none=True)
        for chunk in _chunks(batch, micro):
            loss = _sum_ce(model, chunk, pad_id, device)
            (loss / n_tokens).backward()  # accumulates the batch's mean-token gradient
            recorded += float(loss.detach())
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return recorded


def _model_device(model: Any) -> torch.device:
    return next(model.parameters()).device


def epiplexity(
    questions: Sequence[str],
    base_model: str | os.PathLike | tuple[Any, Any],
    *,
    lora_r: int = 16,
    lora_alpha: int = 32,
    lora_dropout: float = 0.05,
    target_modules: Sequence[str] = TARGET_MODULES,
    max_length: int = 512,
    batch_size: int = 64,
    lr: float = 1e-4,
    weight_decay: float = 0.01,
    max_epochs: int = 20,
    patience: int = 5,
    val_fraction: float = 0.1,
    min_chars: int = 20,
    seed: int = 0,
    device: str = "cpu",
    dtype: str | None = None,
    micro_batch_size: int | None = None,
) -> dict[str, Any]:
    """Epiplexity of ``questions`` (bits per token) under a fresh LoRA observer of
    ``base_model``; see the module docstring for the procedure and its interpretations.

    ``dtype``: the observer's weights (None: bfloat16 on CUDA as in the paper, else float32).
    ``micro_batch_size``: split each batch of ``batch_size`` questions into forward passes of
    this many (gradient accumulation; same update), to bound memory with large vocabularies.

    Returns ``epiplexity_per_token`` (bits/token), ``epiplexity_bits`` (total), ``online_nats``
    / ``online_bits`` (prequential code length), ``train_nats`` / ``val_nats`` at the best epoch,
    ``best_epoch`` (1-based), ``epochs_run``, ``stopped_early``, question counts (``n_questions``,
    ``n_dropped``, ``n_train``, ``n_val``), token counts (``n_train_tokens``, ``n_val_tokens``),
    ``history`` (per epoch: train/val nats, epiplexity bits, MDL criterion) and the
    ``hyperparameters`` used.
    """
    from peft import LoraConfig, get_peft_model

    from vdlib.engines.models import load_model, resolve_device

    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if max_epochs < 1 or patience < 1 or batch_size < 1:
        raise ValueError("max_epochs, patience and batch_size must be >= 1")
    kept = [q for q in questions if len(q.strip()) >= min_chars]
    if len(kept) < 2:
        raise ValueError(f"epiplexity needs >= 2 questions of >= {min_chars} characters "
                         f"(got {len(kept)} of {len(questions)})")
    order = list(range(len(kept)))
    random.Random(seed).shuffle(order)
    n_val = min(max(1, round(val_fraction * len(kept))), len(kept) - 1)
    val_q = [kept[i] for i in order[:n_val]]
    train_q = [kept[i] for i in order[n_val:]]

    owned = isinstance(base_model, str | os.PathLike)
    if owned:
        device = str(resolve_device(device))
        dtype = dtype or ("bfloat16" if device.startswith("cuda") else "float32")
        model, tokenizer = load_model(base_model, dtype=dtype, device=device)
    else:
        model, tokenizer = base_model
    dev = _model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None \
        else tokenizer.eos_token_id
    train_seqs = encode_questions(train_q, tokenizer, max_length)
    val_seqs = encode_questions(val_q, tokenizer, max_length)
    n_train_tok, n_val_tok = _n_predicted(train_seqs), _n_predicted(val_seqs)
    micro = micro_batch_size or batch_size
    hyper = {"lora_r": lora_r, "lora_alpha": lora_alpha, "lora_dropout": lora_dropout,
             "target_modules": list(target_modules), "max_length": max_length,
             "batch_size": batch_size, "lr": lr, "weight_decay": weight_decay,
             "max_epochs": max_epochs, "patience": patience, "val_fraction": val_fraction,
             "min_chars": min_chars, "seed": seed,
             "dtype": str(next(model.parameters()).dtype).removeprefix("torch.")}

    was_training = model.training
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    cuda = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        lora = LoraConfig(r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                          target_modules=list(target_modules), task_type="CAUSAL_LM", bias="none")
        with warnings.catch_warnings():  # peft calls a transformers API deprecated in v5
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                    category=FutureWarning)
            observer = get_peft_model(model, lora)
        try:
            history = _fit(observer, train_seqs, val_seqs, pad_id, dev, micro, batch_size, lr,
                           weight_decay, max_epochs, patience, seed)
        finally:
            if not owned:  # hand the caller's model back as it came
                observer.unload()
                for name, p in model.named_parameters():
                    p.requires_grad_(flags.get(name, p.requires_grad))
                model.train(was_training)
    online = history["online_nats"]
    epochs = history["epochs"]
    best, scores = mdl_select(online, [e["train_nats"] for e in epochs],
                              [e["val_nats"] for e in epochs], n_train_tok, n_val_tok)
    for e, score in zip(epochs, scores, strict=True):
        e["epiplexity_bits"] = (online - e["train_nats"]) / LN2
        e["mdl_bits_per_token"] = score
    epi_bits = epochs[best]["epiplexity_bits"]
    return {
        "epiplexity_per_token": epi_bits / n_train_tok,
        "epiplexity_bits": epi_bits,
        "online_nats": online,
        "online_bits": online / LN2,
        "train_nats": epochs[best]["train_nats"],
        "val_nats": epochs[best]["val_nats"],
        "best_epoch": best + 1,
        "epochs_run": len(epochs),
        "stopped_early": history["stopped_early"],
        "n_questions": len(questions),
        "n_dropped": len(questions) - len(kept),
        "n_train": len(train_q),
        "n_val": len(val_q),
        "n_train_tokens": n_train_tok,
        "n_val_tokens": n_val_tok,
        "history": epochs,
        "hyperparameters": hyper,
    }


def _fit(observer: Any, train_seqs: list[list[int]], val_seqs: list[list[int]], pad_id: int,
         dev: Any, micro: int, batch_size: int, lr: float, weight_decay: float, max_epochs: int,
         patience: int, seed: int) -> dict[str, Any]:
    """Online epoch then training to early stop; per-epoch eval-mode train/val totals."""
    params = [p for p in observer.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    epochs: list[dict[str, Any]] = []
    online = 0.0
    best_val, since_best, stopped_early = math.inf, 0, False
    for epoch in tqdm(range(1, max_epochs + 1), desc="epiplexity epochs", leave=False):
        order = list(range(len(train_seqs)))
        random.Random(f"{seed}-{epoch}").shuffle(order)
        batches = _chunks([train_seqs[i] for i in order], batch_size)
        recorded = _train_epoch(observer, optimizer, batches, pad_id, dev, micro,
                                desc=f"epoch {epoch}")
        if epoch == 1:
            online = recorded
        train_nats = _total_loss(observer, train_seqs, pad_id, dev, micro)
        val_nats = _total_loss(observer, val_seqs, pad_id, dev, micro)
        epochs.append({"epoch": epoch, "train_nats": train_nats, "val_nats": val_nats,
                       "train_pass_nats": recorded})
        if val_nats < best_val:
            best_val, since_best = val_nats, 0
        else:
            since_best += 1
            if since_best >= patience:
                stopped_early = epoch < max_epochs
                break
    return {"online_nats": online, "epochs": epochs, "stopped_early": stopped_early}
