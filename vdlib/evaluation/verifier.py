r"""A cached, retried, budgeted chat-completions client that answers the paper's judging tasks.

:class:`Verifier` talks to any OpenAI-compatible server (client and key:
:mod:`vdlib.utils.openai_client`); :class:`LocalVerifier` answers the same requests with a local
model (the offline stand-in of the tiny profile). Both share:

- server: ``base_url`` or ``$OPENAI_BASE_URL`` (OpenAI's API when neither is set);
- key: read from ``$OPENAI_API_KEY`` only, when a request is about to be sent, and handed
  straight to the ``openai`` client; the verifier keeps that client (which holds the key in
  memory to authenticate its requests) in a private attribute, and nothing else: the key is
  not a verifier attribute of its own, not in ``repr``, not logged, and never written into any
  cache or artifact (:class:`~vdlib.utils.openai_client.MissingAPIKeyError` names the variable when
  it is missing);
- cache: an SQLite file ``verification.sqlite`` in ``cache_dir`` (default
  ``<vdlib cache>/verification``) keyed by ``sha256(base URL, model, messages, params)``; each
  response is committed in its own transaction (atomic), so a rerun, or a run resumed after a
  failure, sends nothing for what it already has and needs no key for it;
- retries: 429, 5xx, timeouts and connection errors are retried up to ``max_retries`` times with
  exponential backoff and jitter (``Retry-After`` / ``retry-after-ms`` honoured, capped at
  ``backoff_max_s``); any other 4xx fails at once with :class:`VerificationRequestError`;
- concurrency: at most ``max_concurrency`` requests in flight (a thread pool);
- budget: ``max_calls`` (requests sent, retries included) and ``max_tokens_budget`` (the
  server's reported ``total_tokens``) stop the run with :class:`BudgetExceededError`, whose
  message says how much was used. Requests already in flight may finish (the token total can
  overshoot by at most ``max_concurrency`` responses); finished responses stay cached;
- ``dry_run=True``: sends nothing and needs no key; it counts the requests a real run would send
  (cache misses, duplicates once) and their prompt tokens, estimated as ``ceil(chars / 4)`` of
  the message contents (the usual rule of thumb for English text with OpenAI tokenizers).
  Every answer is then ``None``.

>>> estimate_tokens([{"role": "user", "content": "x" * 9}])
3
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import sqlite3
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vdlib.evaluation.judging import CORRECTNESS_MODEL, parse_well_posed, well_posed_messages
from vdlib.method.grading import is_equivalent
from vdlib.method.parsing import extract_boxed
from vdlib.method.prompts import evaluation_messages
from vdlib.utils.openai_client import openai_client, resolve_base_url, retry_after_s

__all__ = ["Verifier", "LocalVerifier", "VerifierUsage", "BudgetExceededError",
           "VerificationRequestError", "estimate_tokens", "CHARS_PER_TOKEN"]

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
_RETRYABLE_STATUS = frozenset({429}) | frozenset(range(500, 600))


class BudgetExceededError(RuntimeError):
    """The verifier's call or token budget is spent; the message says how much was used."""


class VerificationRequestError(RuntimeError):
    """A request failed for good: a non-retryable 4xx, or retries exhausted."""


def estimate_tokens(messages: Sequence[dict[str, str]]) -> int:
    """Prompt tokens estimated as ``ceil(characters of the contents / 4)``."""
    chars = sum(len(m.get("content") or "") for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass
class VerifierUsage:
    """Counters of one :class:`Verifier` (cumulative over its calls)."""

    requests: int = 0  # HTTP requests sent (retries included): what ``max_calls`` caps
    retries: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0  # what ``max_tokens_budget`` caps
    dry_run_calls: int = 0  # requests a dry run would have sent
    estimated_prompt_tokens: int = 0  # their prompt tokens, chars / 4

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict (for summaries)."""
        return asdict(self)


class _ResponseStore:
    """Completions keyed by request hash in ``verification.sqlite``: key, model, the reply text
    and its token usage (no headers, no credentials)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.file = folder / "verification.sqlite"
        db = self._open()
        try:
            db.execute("CREATE TABLE IF NOT EXISTS completions (request_sha256 TEXT PRIMARY KEY,"
                       " model TEXT NOT NULL, content TEXT, usage TEXT NOT NULL)")
        finally:
            db.close()

    def _open(self) -> sqlite3.Connection:
        return sqlite3.connect(self.file, timeout=60, isolation_level=None)

    def lookup(self, key: str) -> dict[str, Any] | None:
        db = self._open()
        try:
            row = db.execute("SELECT content, usage FROM completions WHERE request_sha256 = ?",
                             (key,)).fetchone()
        finally:
            db.close()
        return None if row is None else {"content": row[0], "usage": json.loads(row[1])}

    def save(self, key: str, model: str, content: str | None, usage: dict[str, int]) -> None:
        db = self._open()
        try:
            db.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?)",
                       (key, model, content, json.dumps(usage)))
        finally:
            db.close()


class Verifier:
    """A cached, retried, budgeted chat-completions client (see the module docstring).

    ``temperature=None`` omits the parameter (OpenAI's reasoning models such as gpt-5-mini
    accept only their default); ``max_output_tokens`` is sent as ``max_completion_tokens``.
    ``backoff_base_s`` / ``backoff_max_s`` shape the exponential backoff. The ``openai`` client,
    built on the first uncached request, is kept in the private ``_client`` attribute; it holds
    the key in memory (see the module docstring).
    """

    def close(self) -> None:
        """Release what the verifier holds (a local engine's GPU memory); it reopens on use."""

    def __init__(self, model: str = CORRECTNESS_MODEL, base_url: str | None = None,
                 cache_dir: str | os.PathLike | None = None, max_concurrency: int = 8,
                 max_calls: int | None = None, max_tokens_budget: int | None = None,
                 temperature: float | None = 0.0, timeout_s: float = 60,
                 max_retries: int = 5, dry_run: bool = False,
                 max_output_tokens: int | None = None, backoff_base_s: float = 1.0,
                 backoff_max_s: float = 60.0) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.model = model
        self.base_url = resolve_base_url(base_url)
        if cache_dir is None:
            from vdlib.engines.models import default_cache_dir

            cache_dir = default_cache_dir() / "verification"
        self.cache = _ResponseStore(Path(cache_dir).expanduser())
        self.max_concurrency = max_concurrency
        self.max_calls = max_calls
        self.max_tokens_budget = max_tokens_budget
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.dry_run = dry_run
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.usage = VerifierUsage()
        self._lock = threading.Lock()
        self._client: Any = None
        self._stopped: BudgetExceededError | None = None

    def __repr__(self) -> str:  # no key, by construction
        return (f"Verifier(model={self.model!r}, base_url={self.base_url!r}, "
                f"dry_run={self.dry_run})")

    # ------------------------------------------------------------------ requests

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_output_tokens is not None:
            params["max_completion_tokens"] = self.max_output_tokens
        return params

    def request_key(self, messages: Sequence[dict[str, str]]) -> str:
        """``sha256`` of the canonical JSON of (server base URL, model, messages, sampling
        params): the cache key. Two servers that serve a model under the same name never share
        an answer."""
        blob = json.dumps({"base_url": self.base_url, "model": self.model,
                           "messages": list(messages),
                           "params": self._params()}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _openai(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = openai_client(
                    f"verification with {self.model!r}",
                    "use dry_run=True",
                    base_url=self.base_url, timeout=self.timeout_s, max_retries=0)
            return self._client

    def _reserve_request(self) -> None:
        with self._lock:
            if self._stopped is not None:
                raise self._stopped
            reason = None
            if self.max_calls is not None and self.usage.requests >= self.max_calls:
                reason = f"max_calls={self.max_calls} reached"
            elif (self.max_tokens_budget is not None
                  and self.usage.total_tokens >= self.max_tokens_budget):
                reason = f"max_tokens_budget={self.max_tokens_budget} reached"
            if reason is not None:
                u = self.usage
                self._stopped = BudgetExceededError(
                    f"verification budget exceeded ({reason}): used {u.requests} requests "
                    f"({u.retries} retries) and {u.total_tokens} tokens ({u.prompt_tokens} "
                    f"prompt + {u.completion_tokens} completion), {u.cache_hits} cache hits. "
                    "Finished responses are cached; rerun with a larger budget to continue.")
                raise self._stopped
            self.usage.requests += 1

    def _backoff_s(self, attempt: int, err: Exception) -> float:
        hinted = retry_after_s(err)
        if hinted is not None:
            return min(hinted, self.backoff_max_s)
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** attempt)
        return delay / 2 + random.uniform(0, delay / 2)  # "equal jitter"

    def _send(self, messages: list[dict[str, str]]) -> tuple[str | None, dict[str, int]]:
        import openai

        client = self._openai()
        for attempt in range(self.max_retries + 1):
            self._reserve_request()
            try:
                resp = client.chat.completions.create(model=self.model, messages=messages,
                                                      **self._params())
            except (openai.APIConnectionError, openai.APIStatusError) as err:
                status = getattr(err, "status_code", None)
                retryable = status is None or status in _RETRYABLE_STATUS
                what = f"HTTP {status}" if status is not None else type(err).__name__
                if not retryable:
                    raise VerificationRequestError(
                        f"{self.model}: request rejected ({what}); not retried") from err
                if attempt == self.max_retries:
                    raise VerificationRequestError(
                        f"{self.model}: {what} after {self.max_retries} retries") from err
                wait = self._backoff_s(attempt, err)
                logger.warning("%s: %s; retry %d/%d in %.2fs", self.model, what, attempt + 1,
                               self.max_retries, wait)
                with self._lock:
                    self.usage.retries += 1
                time.sleep(wait)
                continue
            content = resp.choices[0].message.content if resp.choices else None
            u = resp.usage
            usage = {"prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0),
                     "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0)}
            usage["total_tokens"] = int(getattr(u, "total_tokens", 0) or 0) or sum(usage.values())
            return content, usage
        raise AssertionError("unreachable")

    def _one(self, key: str, messages: list[dict[str, str]]) -> str | None:
        content, usage = self._send(messages)
        self.cache.save(key, self.model, content, usage)
        with self._lock:
            for name, value in usage.items():
                setattr(self.usage, name, getattr(self.usage, name) + value)
        return content

    def complete(self, conversations: Sequence[list[dict[str, str]]]) -> list[str | None]:
        """The reply text of each conversation, in order (None in dry-run mode or for an empty
        reply). Cached replies are reused; identical conversations are sent once."""
        self._stopped = None
        keys = [self.request_key(m) for m in conversations]
        replies: dict[str, str | None] = {}
        todo: dict[str, list[dict[str, str]]] = {}
        for key, messages in zip(keys, conversations, strict=True):
            if key in replies or key in todo:
                continue
            hit = self.cache.lookup(key)
            if hit is not None:
                replies[key] = hit["content"]
                self.usage.cache_hits += 1
            else:
                todo[key] = list(messages)
        if self.dry_run:
            self.usage.dry_run_calls += len(todo)
            self.usage.estimated_prompt_tokens += sum(map(estimate_tokens, todo.values()))
            logger.info("dry run: %d requests, ~%d prompt tokens would be sent", len(todo),
                        sum(map(estimate_tokens, todo.values())))
            return [replies.get(k) for k in keys]
        if todo:
            replies.update(self._fetch(todo))
        return [replies[k] for k in keys]

    def _fetch(self, todo: dict[str, list[dict[str, str]]]) -> dict[str, str | None]:
        """Send the cache misses (concurrently) and cache each reply; ``{key: reply}``."""
        self._openai()  # fail on a missing key before any thread starts
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            futures = {k: pool.submit(self._one, k, m) for k, m in todo.items()}
            return {key: fut.result() for key, fut in futures.items()}

    # ------------------------------------------------------------------ tasks

    def solve(self, questions: Sequence[str]) -> list[str | None]:
        r"""The verifier's answer to each question: the last ``\boxed{}`` of its reply to the
        paper's evaluation prompt (None when it gave no box, or in dry-run mode)."""
        replies = self.complete([evaluation_messages(q) for q in questions])
        return [extract_boxed(r) for r in replies]

    def check_answers(self, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Solve-and-compare: each record (``question`` plus ``proposer_answer``, or ``answer``
        as in ``questions.jsonl``) copied with ``verifier_answer`` and ``correct``
        (``is_equivalent(proposer answer, verifier answer)``; False when either is missing)."""
        answers = self.solve([r["question"] for r in records])
        out = []
        for rec, ver in zip(records, answers, strict=True):
            prop = rec.get("proposer_answer", rec.get("answer"))
            out.append({**rec, "verifier_answer": ver,
                        "correct": bool(prop is not None and ver is not None
                                        and is_equivalent(prop, ver))})
        return out

    def label_well_posed(self, questions: Sequence[str]) -> list[bool | None]:
        """True (well-posed), False (ill-posed) or None (unparseable verdict, or dry run)."""
        replies = self.complete([well_posed_messages(q) for q in questions])
        return [parse_well_posed(r) for r in replies]


class LocalVerifier(Verifier):
    """The same judging tasks answered by a local model (``vdlib.engines.models`` name or path) on
    this machine: the offline stand-in of the tiny profile, not the paper's judge. Greedy decoding
    by default, the model's chat template, at most ``max_new_tokens`` per reply; replies are
    cached like the remote ones (cache key model ``local:<name>``); budgets apply to requests
    (one per conversation) and to prompt + completion tokens."""

    def __init__(self, model: str, *, max_new_tokens: int = 512, device: str = "cpu",
                 dtype: str = "float32", batch_size: int = 16, model_cache_dir: str | None = None,
                 engine: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("temperature", 0.0)
        super().__init__(model=f"local:{model}", max_output_tokens=max_new_tokens, **kwargs)
        self.local_model = model
        self.device, self.dtype, self.batch_size = device, dtype, batch_size
        self.model_cache_dir = model_cache_dir
        self.engine_config = engine  # vdlib.config.experiment.EngineConfig; None = transformers
        self._engine: Any = None
        self._stack: Any = None

    def _load(self) -> tuple[Any, Any]:
        if self._engine is None:
            import contextlib

            from vdlib.config.experiment import EngineConfig
            from vdlib.engines.setting import open_engine

            self._stack = contextlib.ExitStack()
            engine = self._stack.enter_context(open_engine(
                self.engine_config or EngineConfig(backend="hf"), self.local_model,
                device=self.device, dtype=self.dtype, cache_dir=self.model_cache_dir,
                max_new_tokens=self.max_output_tokens or 512, max_prompt_tokens=2048,
                batch_size=self.batch_size))
            self._engine = (engine, engine.tokenizer)
        return self._engine

    def close(self) -> None:
        """Release the local model or engine (a vLLM engine frees its GPU memory)."""
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        self._engine = None

    def _fetch(self, todo: dict[str, list[dict[str, str]]]) -> dict[str, str | None]:
        from vdlib.method.prompts import apply_chat_template

        engine, tok = self._load()
        keys = list(todo)
        for _ in keys:
            self._reserve_request()
        prompts = [apply_chat_template(tok, todo[k]) for k in keys]
        outs = engine.generate(prompts, n=1, temperature=self.temperature or 0.0, top_p=1.0,
                               max_new_tokens=self.max_output_tokens or 512, seed=0)
        replies: dict[str, str | None] = {}
        for key, prompt, out in zip(keys, prompts, outs, strict=True):
            usage = {"prompt_tokens": len(tok(prompt, add_special_tokens=False)["input_ids"]),
                     "completion_tokens": len(out.token_ids)}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            self.cache.save(key, self.model, out.text, usage)
            for name, value in usage.items():
                setattr(self.usage, name, getattr(self.usage, name) + value)
            replies[key] = out.text
        return replies
