"""vdlib.evaluation.verification against a scripted fake OpenAI-compatible server on 127.0.0.1.

No test here touches the network: the server runs in a thread of the test process.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vdlib.evaluation.verification import (
    TRANSFER_TRAINING,
    BudgetExceededError,
    MissingAPIKeyError,
    VerificationRequestError,
    Verifier,
    build_transfer_dataset,
    estimate_tokens,
    parse_well_posed,
    proposer_correctness,
)
from vdlib.utils.artifacts import read_jsonl, write_jsonl

SECRET = "sk-test-SECRET123"


class FakeOpenAI:
    """``/v1/chat/completions`` with a per-test script of failures, then normal answers.

    ``script`` items are consumed one per request: ``("status", code, headers)`` answers with
    that HTTP error, ``("slow", seconds)`` sleeps before answering normally. ``reply(body)``
    gives the assistant text of a normal answer.
    """

    def __init__(self) -> None:
        self.script: list[tuple] = []
        self.bodies: list[dict] = []
        self.auth: list[str | None] = []
        self.reply: Callable[[dict], str] = lambda body: "Adding up, \\boxed{42}"
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _send(self, code: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.bodies.append(body)
                    fake.auth.append(self.headers.get("Authorization"))
                    action = fake.script.pop(0) if fake.script else ("ok",)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "no such route"}})
                if action[0] == "status":
                    return self._send(action[1], {"error": {"message": f"scripted {action[1]}"}},
                                      action[2] if len(action) > 2 else None)
                if action[0] == "slow":
                    time.sleep(action[1])
                try:
                    self._send(200, {
                        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant",
                                                 "content": fake.reply(body)}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                  "total_tokens": 15}})
                except OSError:  # the client timed out and closed the socket
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def n(self) -> int:
        return len(self.bodies)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    fake = FakeOpenAI()
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    yield fake
    fake.close()


def make(tmp_path: Path, **kw) -> Verifier:
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("backoff_max_s", 0.5)
    kw.setdefault("timeout_s", 5)
    return Verifier(cache_dir=tmp_path / "cache", **kw)


def last_user(body: dict) -> str:
    return body["messages"][-1]["content"]


def test_solve_returns_boxed_answers_and_sends_the_key(server, tmp_path):
    answers = {"A": "\\boxed{1}", "B": "so \\boxed{\\frac{1}{2}}", "C": "no box here"}
    server.reply = lambda body: answers[last_user(body).split("\n")[0]]
    v = make(tmp_path)
    assert v.solve(["A", "B", "C"]) == ["1", "\\frac{1}{2}", None]
    assert server.n == 3 and set(server.auth) == {f"Bearer {SECRET}"}
    assert server.bodies[0]["model"] == "gpt-4.1-mini"
    assert server.bodies[0]["temperature"] == 0.0
    assert v.usage.total_tokens == 45 and v.usage.requests == 3
    assert SECRET not in repr(v) and SECRET not in json.dumps(vars(v), default=str)


def test_cache_prevents_repeat_calls_across_instances(server, tmp_path):
    v = make(tmp_path)
    assert v.solve(["Q1", "Q2", "Q1"]) == ["42", "42", "42"]
    assert server.n == 2  # the duplicate is sent once
    again = make(tmp_path)
    assert again.solve(["Q2", "Q1"]) == ["42", "42"]
    assert server.n == 2 and again.usage.cache_hits == 2 and again.usage.requests == 0
    other_model = make(tmp_path, model="gpt-5-mini")
    other_model.solve(["Q1"])
    assert server.n == 3  # the key includes the model


def test_two_servers_with_one_model_name_never_share_an_answer(server, tmp_path):
    second = FakeOpenAI()
    try:
        second.reply = lambda body: "\\boxed{7}"
        assert make(tmp_path).solve(["Q1"]) == ["42"]
        other = make(tmp_path, base_url=second.url)
        assert other.request_key([{"role": "user", "content": "x"}]) != make(
            tmp_path).request_key([{"role": "user", "content": "x"}])
        assert other.solve(["Q1"]) == ["7"] and second.n == 1  # asked, not read from the cache
    finally:
        second.close()


def test_retries_429_with_retry_after_500_and_timeout(server, tmp_path, caplog):
    server.script = [("status", 429, {"Retry-After": "0.3"}), ("status", 500), ("slow", 1.5)]
    v = make(tmp_path, timeout_s=0.5, max_concurrency=1)
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="vdlib.evaluation.verifier"):
        assert v.solve(["Q"]) == ["42"]
    assert time.monotonic() - start >= 0.3 + 0.5  # Retry-After waited, slow reply timed out
    assert server.n == 4 and v.usage.retries == 3 and v.usage.requests == 4
    text = caplog.text
    assert "HTTP 429" in text and "HTTP 500" in text and "Timeout" in text
    assert SECRET not in text


def test_retries_exhausted_and_other_4xx_fail_clearly(server, tmp_path):
    server.script = [("status", 503)] * 3
    with pytest.raises(VerificationRequestError, match="HTTP 503 after 2 retries"):
        make(tmp_path, max_retries=2).solve(["Q"])
    assert server.n == 3
    server.script = [("status", 400)]
    with pytest.raises(VerificationRequestError, match="HTTP 400.*not retried"):
        make(tmp_path, max_retries=5).solve(["Q other"])
    assert server.n == 4  # no retry on a 400


def test_call_budget_stops_the_run_and_a_rerun_resumes(server, tmp_path):
    questions = [f"Q{i}" for i in range(5)]
    with pytest.raises(BudgetExceededError, match=r"max_calls=2 reached\): used 2 requests"):
        make(tmp_path, max_calls=2, max_concurrency=1).solve(questions)
    assert server.n == 2
    v = make(tmp_path, max_calls=3)
    assert v.solve(questions) == ["42"] * 5
    assert server.n == 5 and v.usage.cache_hits == 2


def test_token_budget_message_reports_tokens(server, tmp_path):
    with pytest.raises(BudgetExceededError, match="max_tokens_budget=20.*30 tokens"):
        make(tmp_path, max_tokens_budget=20, max_concurrency=1).solve(["a", "b", "c", "d"])
    assert server.n == 2


def test_dry_run_counts_and_sends_nothing(server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")  # a dry run needs no key
    v = make(tmp_path, dry_run=True)
    assert v.solve(["What is 1+1?", "What is 2+2?", "What is 1+1?"]) == [None] * 3
    assert server.n == 0
    assert v.usage.dry_run_calls == 2 and v.usage.requests == 0
    from vdlib.method.prompts import evaluation_messages

    assert v.usage.estimated_prompt_tokens == 2 * estimate_tokens(
        evaluation_messages("What is 1+1?"))


def test_missing_key_is_a_clear_error_unless_cached(server, tmp_path, monkeypatch):
    make(tmp_path).solve(["Q"])
    monkeypatch.delenv("OPENAI_API_KEY")
    assert make(tmp_path).solve(["Q"]) == ["42"]  # cached: no key needed
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
        make(tmp_path).solve(["a new question"])
    assert server.n == 1


def test_check_answers_uses_math_equivalence(server, tmp_path):
    server.reply = lambda body: "\\boxed{\\frac{1}{2}}"
    recs = [{"question": "half?", "answer": "0.5"},
            {"question": "half again?", "proposer_answer": "1/3", "answer": "1/2"},
            {"question": "no answer", "answer": None}]
    out = make(tmp_path).check_answers(recs)
    assert [r["correct"] for r in out] == [True, False, False]
    assert out[0]["verifier_answer"] == "\\frac{1}{2}" and out[0]["answer"] == "0.5"


def test_label_well_posed_parses_json_boxed_or_gives_none(server, tmp_path):
    verdicts = {"P1": 'fine.\n{"well_posed": true}', "P2": "```json\n{\"well_posed\": false}\n```",
                "P3": "\\boxed{ill-posed}", "P4": "hmm, hard to say"}
    server.reply = lambda body: next(v for k, v in verdicts.items() if k in last_user(body))
    assert make(tmp_path).label_well_posed(list(verdicts)) == [True, False, False, None]
    assert parse_well_posed("Final verdict: the problem is ill-posed.") is False
    assert parse_well_posed("well-posed or ill-posed?") is None


def make_run(root: Path, t: int = 5) -> Path:
    run = root / "run"
    write_jsonl(run / f"iter_{t}" / "questions.jsonl", [
        {"question": "Compute 6*7.", "answer": "42", "acc": 0.5, "valid": True, "majority": "42"},
        {"question": "Compute 5+5.", "answer": "11", "acc": 0.4, "valid": True, "majority": "10"},
        {"question": None, "answer": None, "acc": None, "valid": False, "majority": None},
        {"question": "Half of 1?", "answer": "1/2", "acc": 0.6, "valid": True, "majority": "0.5"},
        {"question": "Unanswerable.", "answer": "3", "acc": 0.3, "valid": True, "majority": "3"},
    ])
    return run


def oracle(body: dict) -> str:
    q = last_user(body)
    for key, reply in {"6*7": "\\boxed{42}", "5+5": "\\boxed{10}", "Half": "\\boxed{0.5}",
                       "Unanswerable": "I cannot tell."}.items():
        if key in q:
            return reply
    return "\\boxed{?}"


def test_build_transfer_dataset(server, tmp_path):
    server.reply = oracle
    run = make_run(tmp_path)
    v = make(tmp_path, model="gpt-5-mini")
    out = build_transfer_dataset(run, 5, v)
    assert out == run / "transfer" / "iter_5" / "curriculum.jsonl"
    kept = read_jsonl(out)
    assert kept == [{"question": "Compute 6*7.", "answer": "42", "verifier_answer": "42",
                     "acc": 0.5},
                    {"question": "Half of 1?", "answer": "1/2", "verifier_answer": "0.5",
                     "acc": 0.6}]
    summary = json.loads(out.with_name("curriculum.summary.json").read_text())
    assert summary["n_valid"] == 4 and summary["n_kept"] == 2 and summary["kept_fraction"] == 0.5
    assert summary["training"] == TRANSFER_TRAINING and summary["model"] == "gpt-5-mini"
    assert server.n == 4
    build_transfer_dataset(run, 5, make(tmp_path, model="gpt-5-mini"), tmp_path / "x.jsonl")
    assert server.n == 4 and len(read_jsonl(tmp_path / "x.jsonl")) == 2  # all cached
    with pytest.raises(FileNotFoundError, match="iter_4"):
        build_transfer_dataset(run, 4, v)


def test_dry_run_transfer_writes_only_a_summary(server, tmp_path):
    run = make_run(tmp_path)
    out = build_transfer_dataset(run, 5, make(tmp_path, dry_run=True))
    assert not out.exists() and server.n == 0
    summary = json.loads(out.with_name("curriculum.summary.json").read_text())
    assert summary["dry_run"] and summary["usage"]["dry_run_calls"] == 4


def test_no_key_in_any_written_file(server, tmp_path, caplog):
    server.reply = oracle
    run = make_run(tmp_path)
    server.script = [("status", 429, {"Retry-After": "0"})]
    with caplog.at_level(logging.DEBUG):
        v = make(tmp_path)
        rates = proposer_correctness(run, v)
        v.label_well_posed(["Compute 6*7."])
        build_transfer_dataset(run, 5, v)
    assert rates == {5: 0.5}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in files) and len(files) >= 5
    for path in files:
        data = path.read_bytes()
        assert b"SECRET123" not in data and b"sk-test" not in data, path
    assert "SECRET123" not in caplog.text


# ----------------------------------------------------------------------------- one client home


def test_key_and_server_have_one_home(monkeypatch):
    from email.utils import formatdate

    import vdlib.evaluation.verification as verification
    from vdlib.evaluation import verifier
    from vdlib.metrics import embeddings
    from vdlib.utils import openai_client

    assert verification.MissingAPIKeyError is embeddings.MissingAPIKeyError \
        is openai_client.MissingAPIKeyError
    for name in ("Verifier", "LocalVerifier", "BudgetExceededError", "estimate_tokens"):
        assert getattr(verification, name) is getattr(verifier, name)
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY.*or use X"):
        openai_client.openai_client("the test", "use X")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert openai_client.require_api_key("the test", "use X") == SECRET
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1")
    assert openai_client.resolve_base_url("http://arg/v1") == "http://arg/v1"
    assert openai_client.resolve_base_url(None) == "http://env/v1"
    client = openai_client.openai_client("the test", "use X", timeout=3, max_retries=0)
    assert str(client.base_url).startswith("http://env/v1") and client.max_retries == 0

    class Failure(Exception):
        def __init__(self, headers):
            self.response = type("R", (), {"headers": headers})()

    assert openai_client.retry_after_s(Failure({"retry-after-ms": "250"})) == 0.25
    assert openai_client.retry_after_s(Failure({"retry-after": "2"})) == 2.0
    assert openai_client.retry_after_s(Failure({"retry-after": formatdate(0)})) == 0.0
    assert openai_client.retry_after_s(Failure({"retry-after": "soon"})) is None
    assert openai_client.retry_after_s(Failure({})) is None


def test_the_key_lives_only_in_the_client_object(server, tmp_path):
    v = make(tmp_path)
    assert v._client is None  # nothing built before the first uncached request
    v.solve(["Q"])
    assert v._client.api_key == SECRET  # what the docstring says the verifier holds
    others = {k: val for k, val in vars(v).items() if k != "_client"}
    assert SECRET not in json.dumps(others, default=repr) and SECRET not in repr(v)
