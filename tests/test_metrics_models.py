"""Tests for the model-based metrics: embedders, epiplexity, NLI diversity, iteration metrics."""

from __future__ import annotations

import base64
import http.server
import itertools
import json
import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from vdlib.engines.models import ModelUnavailableError, load_model
from vdlib.metrics import embeddings as E
from vdlib.metrics.embeddings import MissingAPIKeyError, embed, minilm_path
from vdlib.metrics.epiplexity import encode_questions, epiplexity
from vdlib.metrics.nli import (
    LABEL_SCORES,
    _pair_indices,
    labels_from_config,
    nli_diversity,
    nli_pair_scores,
)
from vdlib.metrics.run_metrics import (
    SUMMARY_COLUMNS,
    compute_iteration_metrics,
    summary_metrics,
    write_iteration_metrics,
)
from vdlib.utils.artifacts import atomic_write_json, write_jsonl
from vdlib.utils.registry import UnknownNameError

SIMILAR = ["What is the sum of 12 and 30?", "Compute 12 plus 30.",
           "A rectangle has sides 3 and 4; find its diagonal.",
           "Describe the history of the Roman empire."]

VD75 = {"train": 0.75, "gen": 0.75}  # alpha_train, alpha_gen of a vd75 iteration


@pytest.fixture(scope="module")
def minilm_vectors():
    return embed(SIMILAR, "minilm")


# ----------------------------------------------------------------------------- embeddings


def test_minilm_normalised_deterministic_and_semantic(minilm_vectors):
    v = minilm_vectors
    assert v.shape == (4, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    again = embed([SIMILAR[1], SIMILAR[0], SIMILAR[1]], "minilm", batch_size=1)
    np.testing.assert_allclose(again, v[[1, 0, 1]], atol=1e-5)  # batching/padding-invariant
    sim = v @ v.T
    assert sim[0, 1] > sim[0, 3] + 0.2 and sim[0, 1] > sim[1, 3] + 0.2


def test_hf_local_folder_reads_pooling_config(minilm_vectors):
    # the packaged folder through the generic path: mean pooling from 1_Pooling/config.json,
    # max_seq_length 256 from sentence_bert_config.json -> the same vectors as "minilm"
    v = embed(SIMILAR, f"hf:{minilm_path()}")
    np.testing.assert_allclose(v, minilm_vectors, atol=1e-5)


def test_unknown_embedder_lists_valid_names():
    with pytest.raises(UnknownNameError, match="valid names: minilm") as info:
        embed(["x"], "no-such-embedder")
    assert "openai:text-embedding-3-small" in str(info.value) and "hf:<id" in str(info.value)
    assert embed([], "no-such-embedder-either").shape == (0, 0)  # nothing to embed: no lookup


def test_hf_hub_id_offline_fails_clearly():
    start = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match="HF_HUB_OFFLINE"):
        embed(["x"], "hf:no-such-org/no-such-encoder")
    assert time.perf_counter() - start < 10


def test_pool_modes():
    hidden = torch.arange(12, dtype=torch.float32).view(2, 3, 2)
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    assert E.pool(hidden, mask, "mean").tolist() == [[1.0, 2.0], [9.0, 10.0]]
    assert E.pool(hidden, mask, "cls").tolist() == [[0.0, 1.0], [6.0, 7.0]]
    assert E.pool(hidden, mask, "lasttoken").tolist() == [[2.0, 3.0], [10.0, 11.0]]


class _FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """POST /v1/embeddings: a deterministic (unnormalised) 8-d vector per input."""

    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                    "body": body})
        data = []
        for i, text in enumerate(body["input"]):
            vec = _fake_vector(text)
            emb = (base64.b64encode(vec.tobytes()).decode()
                   if body.get("encoding_format") == "base64" else vec.tolist())
            data.append({"object": "embedding", "index": i, "embedding": emb})
        payload = json.dumps({"object": "list", "data": data[::-1], "model": body["model"],
                              "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def _fake_vector(text: str) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, text)))
    return (rng.normal(size=8) * 3).astype(np.float32)


@pytest.fixture()
def fake_openai(monkeypatch):
    _FakeOpenAI.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-4242")
    yield _FakeOpenAI.requests
    server.shutdown()
    server.server_close()


def test_openai_embedder_batches_caches_and_keeps_no_key(fake_openai, tmp_path, monkeypatch):
    texts = ["alpha question", "beta question", "gamma question", "alpha question", "delta"]
    name = "openai:text-embedding-3-small"
    v = embed(texts, name, batch_size=2, cache_dir=tmp_path)
    unique = list(dict.fromkeys(texts))
    assert len(fake_openai) == 2  # 4 unique texts, 2 per request, the duplicate sent once
    assert [len(r["body"]["input"]) for r in fake_openai] == [2, 2]
    assert all(r["path"] == "/v1/embeddings" and r["body"]["model"] == "text-embedding-3-small"
               and r["auth"] == "Bearer sk-test-SECRET-4242" for r in fake_openai)
    sent = [t for r in fake_openai for t in r["body"]["input"]]
    assert sent == unique
    expected = E.l2_normalize(np.stack([_fake_vector(t) for t in texts]))
    np.testing.assert_allclose(v, expected, atol=1e-6)  # order restored despite reversed data
    # a rerun is served from the cache, without requests and without the key
    monkeypatch.delenv("OPENAI_API_KEY")
    np.testing.assert_array_equal(embed(texts, name, batch_size=2, cache_dir=tmp_path), v)
    assert len(fake_openai) == 2
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        embed(["a new text"], name, cache_dir=tmp_path)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and not any(b"SECRET-4242" in p.read_bytes() for p in files)
    assert not any(b"alpha question" in p.read_bytes() for p in files)  # hashes, not texts
    # only the new text goes out once the key is back
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-4242")
    embed(["a new text", *texts], name, cache_dir=tmp_path)
    assert len(fake_openai) == 3 and fake_openai[-1]["body"]["input"] == ["a new text"]


# ----------------------------------------------------------------------------- epiplexity


EPI_FAST = dict(batch_size=8, lr=1e-2, lora_r=4, lora_alpha=8, max_epochs=3, patience=2)
REPEATED = (["What is the sum of two and three apples?"] * 10
            + ["Compute the product of seven and eight."] * 10 + ["short?"])


def test_epiplexity_tiny_random_learnable_corpus():
    model, tok = load_model("tiny-random")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    r = epiplexity(REPEATED, (model, tok), **EPI_FAST)
    keys = {"epiplexity_per_token", "epiplexity_bits", "online_nats", "online_bits", "train_nats",
            "val_nats", "best_epoch", "epochs_run", "stopped_early", "n_questions", "n_dropped",
            "n_train", "n_val", "n_train_tokens", "n_val_tokens", "history", "hyperparameters"}
    assert keys <= set(r)
    assert r["n_dropped"] == 1 and r["n_train"] + r["n_val"] == 20 and r["n_val"] == 2
    assert 1 <= r["best_epoch"] <= r["epochs_run"] <= 3 and len(r["history"]) == r["epochs_run"]
    assert all(math.isfinite(r[k]) for k in ("epiplexity_per_token", "online_nats", "val_nats"))
    assert r["online_nats"] >= r["train_nats"] and r["epiplexity_per_token"] > 0
    assert r["epiplexity_per_token"] == pytest.approx(
        (r["online_nats"] - r["train_nats"]) / math.log(2) / r["n_train_tokens"])
    kept = encode_questions([q for q in REPEATED if len(q) >= 20], tok, 512)
    assert kept[0][0] == tok.bos_token_id and kept[0][-1] == tok.eos_token_id
    assert r["n_train_tokens"] + r["n_val_tokens"] == sum(len(s) - 1 for s in kept)
    # the caller's model comes back unchanged, without LoRA layers
    after = model.state_dict()
    assert set(after) == set(before) and all(torch.equal(after[k], before[k]) for k in before)
    assert type(model).__name__ == "LlamaForCausalLM" and not model.training


def test_epiplexity_zero_learning_rate_has_zero_epiplexity():
    # nothing is learnt: every epoch's training loss equals the online code length
    settings = {**EPI_FAST, "lr": 0.0, "max_epochs": 2, "patience": 1}
    r = epiplexity(REPEATED, "tiny-random", **settings)
    assert r["epiplexity_bits"] == pytest.approx(0.0, abs=1e-5 * r["online_bits"])
    assert r["history"][0]["train_nats"] == pytest.approx(r["online_nats"], rel=1e-5)


def test_epiplexity_needs_two_questions():
    with pytest.raises(ValueError, match=">= 2 questions"):
        epiplexity(["tiny", "What is the sum of two and three?"], "tiny-random")


# ----------------------------------------------------------------------------- NLI


class _StubNLI:
    """Deterministic labels from the two texts; records the pairs it was asked about."""

    labels = ("entailment", "neutral", "contradiction")

    def __init__(self):
        self.calls = 0

    def label(self, p: str, h: str) -> str:
        return self.labels[(len(p) * 7 + len(h) * 3 + p.count("a")) % 3]

    def predict(self, premises, hypotheses, batch_size):
        self.calls += 1
        return [self.label(p, h) for p, h in zip(premises, hypotheses, strict=True)]


TEXTS = ["a", "bb", "ccc a", "dddd", "ee aa", "f", "gg ga"]


@pytest.mark.parametrize("n", range(1, 8))
def test_pair_enumeration_matches_itertools(n):
    bi = _pair_indices(n, "bidirectional", None, 0).tolist()
    uni = _pair_indices(n, "unidirectional", None, 0).tolist()
    assert bi == [list(p) for p in itertools.permutations(range(n), 2)]
    assert uni == [list(p) for p in itertools.combinations(range(n), 2)]


def test_nli_diversity_matches_slow_reference():
    stub = _StubNLI()
    score = {k: v for k, v in LABEL_SCORES.items()}
    ref_bi = np.mean([score[stub.label(p, h)] for p, h in itertools.permutations(TEXTS, 2)])
    ref_uni = np.mean([score[stub.label(p, h)] for p, h in itertools.combinations(TEXTS, 2)])
    assert nli_diversity(TEXTS, model=stub) == pytest.approx(ref_bi)
    assert nli_diversity(TEXTS, model=stub, direction="unidirectional") == pytest.approx(ref_uni)
    assert ref_bi != ref_uni  # the stub is asymmetric, so the directions differ
    pairs, scores = nli_pair_scores(TEXTS, model=stub, max_pairs=10, seed=3)
    assert len({tuple(p) for p in pairs.tolist()}) == 10 and all(i != j for i, j in pairs)
    assert scores.tolist() == [score[stub.label(TEXTS[i], TEXTS[j])] for i, j in pairs]
    same, _ = nli_pair_scores(TEXTS, model=stub, max_pairs=10, seed=3)
    assert np.array_equal(pairs, same)
    with pytest.raises(ValueError, match="direction"):
        nli_diversity(TEXTS, model=stub, direction="both")
    with pytest.raises(ValueError, match=">= 2 texts"):
        nli_diversity(["one"], model=stub)


def test_nli_hf_model_reads_label_order_from_config(tmp_path):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    id2label = {0: "NEUTRAL", 1: "CONTRADICTION", 2: "ENTAILMENT"}  # an unusual order
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, num_labels=3,
                        id2label=id2label, label2id={v: k for k, v in id2label.items()})
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    tok = AutoTokenizer.from_pretrained(minilm_path())
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    texts = ["Two plus two is four.", "The answer is five.", "Find x.", "x equals two."]
    expected = []
    with torch.no_grad():
        for p, h in itertools.permutations(texts, 2):  # one pair at a time, no padding
            cls = int(model(**tok(p, h, return_tensors="pt")).logits.argmax())
            expected.append(LABEL_SCORES[id2label[cls].lower()])
    got = nli_diversity(texts, model=f"hf:{tmp_path}", batch_size=5, device="cpu")
    assert got == pytest.approx(float(np.mean(expected)))


def test_nli_offline_hub_and_bad_labels_fail_clearly():
    with pytest.raises(ModelUnavailableError, match="HF_HUB_OFFLINE"):
        nli_diversity(["a b", "c d"], model="hf:no-such-org/no-such-nli-model")
    with pytest.raises(UnknownNameError, match="deberta-v3-large-mnli-fever-anli-ling-wanli"):
        nli_diversity(["a b", "c d"], model="roberta-nli")
    with pytest.raises(ValueError, match="id2label"):
        labels_from_config({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})


# ----------------------------------------------------------------------------- run metrics


def _write_iteration(d: Path, questions: list[str | None], entropies=(1.2, 0.8)) -> None:
    d.mkdir(parents=True)
    write_jsonl(d / "proposer_rollouts.jsonl",
                [{"valid": True, "reward": 0.5}, {"valid": False, "reward": 0.0}])
    atomic_write_json(d / "proposer_train.json", {
        "alpha": 0.75, "masked": True, "mask_log": [{"kept_fraction": 0.75}],
        "log_history": [*({"step": i, "entropy": e} for i, e in enumerate(entropies)),
                        {"train_loss": 0.1}]})
    records = [{"index": i, "question": q, "answer": "3", "valid": q is not None,
                "acc": 0.5 if q else None, "proposer_agrees": True if q else None}
               for i, q in enumerate(questions)]
    write_jsonl(d / "questions.jsonl", records)
    write_jsonl(d / "curriculum.jsonl",
                [{"question": r["question"], "answer": "3", "acc": 0.5} for r in records
                 if r["valid"]][:2])
    atomic_write_json(d / "solver_train.json", {"curriculum_size": 2, "mean_reward": 0.25})


def _write_run(root: Path, run_id: str | None, seed: int, iterations) -> Path:
    run = root / "exp" / (run_id or f"seed{seed}")
    run.mkdir(parents=True)
    config = {"experiment": "exp", "seed": seed, "run_id": run_id,
              "model": {"proposer": "tiny-random"}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    for t, questions in enumerate(iterations, start=1):
        _write_iteration(run / f"iter_{t}", questions)
    return run


def test_iteration_metrics_on_synthetic_run(tmp_path, tokenizer):
    q1 = ["What is 2 + 3?", "What is 2 + 3?", "Compute 12 * 12 for 1,000 apples."]
    q2 = ["What is 2 + 3?", "Describe the history of the Roman empire in 1,000 words.", None]
    run = _write_run(tmp_path, "vd75-seed0", 0, [q1, q2, ["Only one question 7?"], [None]])
    seen = []
    m1 = write_iteration_metrics(run / "iter_1", 1, VD75, tokenizer=tokenizer,
                                 extra=[lambda ctx: seen.append(ctx.texts) or {"n_extra": 7}])
    assert json.loads((run / "iter_1" / "metrics.json").read_text()) == m1
    assert seen == [q1] and m1["n_extra"] == 7
    assert m1["valid_questions"] == 3 and m1["mean_acc"] == 0.5  # from vdlib.metrics.loop
    assert 1.0 <= m1["vendi"] < 2.1 and 0 < m1["self_bleu"] <= 1
    assert m1["novelty_rate"] == 1.0 and m1["cumulative_vendi"] == pytest.approx(m1["vendi"])
    assert 0 < m1["mean_pairwise_cosine_distance"] < 1
    assert m1["unique_tokens"] == len({i for q in q1 for i in tokenizer(q)["input_ids"]})
    assert m1["mean_distinct_numbers"] == pytest.approx((2 + 2 + 2) / 3)
    assert m1["proposer_entropy"] == pytest.approx(1.0) and m1["proposer_entropy_last"] == 0.8
    assert m1["embedder"] == "minilm"
    m2 = write_iteration_metrics(run / "iter_2", 2, VD75, tokenizer=tokenizer)
    assert m2["valid_questions"] == 2 and m2["novelty_rate"] == 0.5  # the repeat is not novel
    assert m2["cumulative_vendi"] > m2["vendi"] * 0.99
    m3 = compute_iteration_metrics(run / "iter_3", 3, VD75, tokenizer=tokenizer)
    assert m3["valid_questions"] == 1 and m3["novelty_rate"] == 1.0  # no previous dirs given
    assert all(m3[k] is None for k in ("self_bleu", "vendi", "mean_pairwise_cosine_distance",
                                        "cumulative_vendi"))
    assert m3["unique_tokens"] > 0 and m3["mean_question_chars"] == 20
    m4 = write_iteration_metrics(run / "iter_4", 4, VD75, tokenizer=None, embedder=None)
    assert m4["valid_questions"] == 0
    assert all(m4[k] is None for k in ("self_bleu", "vendi", "novelty_rate", "unique_tokens",
                                        "mean_question_tokens", "mean_distinct_numbers"))
    other = _write_run(tmp_path, None, 1, [q1])
    write_iteration_metrics(other / "iter_1", 1, {"train": 1.0, "gen": 1.0}, embedder=None)
    table = summary_metrics([tmp_path / "exp"])
    assert list(table.columns) == SUMMARY_COLUMNS
    assert set(table["arm"]) == {"vd75", "exp"} and set(table["seed"]) == {0, 1}
    per_iter = table[table["arm"] == "vd75"].groupby("iteration").size()
    assert per_iter.index.tolist() == [1, 2, 4]  # iter_3 has no metrics.json
    metrics = table.groupby("iteration")["metric"].apply(set)
    assert metrics[1] == metrics[2] | {"n_extra"} and "vendi" not in metrics[4]  # None: no row
    vendi = table.query("arm == 'vd75' and metric == 'vendi'").set_index("iteration")["value"]
    assert vendi.index.tolist() == [1, 2] and vendi[1] == pytest.approx(m1["vendi"])
    assert "embedder" not in set(table["metric"]) and table["value"].dtype == float
