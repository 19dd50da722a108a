"""vdlib.engines.serving without vLLM: the command builder, and the process handling against a fake
server (a small script written to tmp_path that serves /health after a delay) on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
import time
import urllib.request

import pytest

from vdlib.engines.serving import (
    PROCESSOR,
    ServerEngine,
    ServerStartError,
    VLLMServer,
    free_port,
    log_tail,
    server_command,
)

FAKE_SERVER = textwrap.dedent('''
    import json, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    port, delay, mode = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    print("fake vllm: starting", flush=True)
    if mode == "die":
        print("fake vllm: CUDA out of memory (simulated)", flush=True)
        sys.exit(3)
    start = time.monotonic()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            ready = mode != "never" and time.monotonic() - start >= delay
            if self.path == "/health":
                self._send(200 if ready else 503, {})
            elif self.path == "/v1/models":
                self._send(200, {"data": [{"id": "fake-model"}]})
            else:
                self._send(404, {})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            xargs = body.get("vllm_xargs") or {}
            base = 100 if xargs else 0
            choices = [{"index": i, "text": "x", "finish_reason": "length",
                        "token_ids": [base + len(body["prompt"]) + i] * body["max_tokens"]}
                       for i in range(body["n"])]
            self._send(200, {"choices": choices, "echo": body})

    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
''')


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_SERVER)

    def make(delay: float = 0.3, mode: str = "ok", **kw) -> VLLMServer:
        kw.setdefault("startup_timeout", 5.0)
        return VLLMServer("fake-model", command=[sys.executable, str(script), "{port}",
                                                 str(delay), mode],
                          poll_interval=0.05, stop_timeout=2.0, log_path=tmp_path / "srv.log",
                          **kw)
    return make


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_command_has_processor_port_and_options():
    cmd = server_command("m", port=1234, gpu_memory_utilization=0.5, max_model_len=4096,
                         dtype="bfloat16", seed=3, extra=["--enforce-eager"], python="py")
    assert cmd[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--port") + 1] == "1234"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--logits-processors") + 1] == PROCESSOR
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.5"
    assert cmd[cmd.index("--max-model-len") + 1] == "4096"
    assert cmd[cmd.index("--generation-config") + 1] == "vllm"
    assert cmd[-1] == "--enforce-eager"
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        server_command("m", port=1, gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="port"):
        server_command("m", port=0)


def test_free_port_is_bindable_and_server_gets_one():
    port = free_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # still free
    srv = VLLMServer("m", gpu=1)  # nothing starts before start()
    assert srv.port > 0 and srv.command[srv.command.index("--port") + 1] == str(srv.port)
    assert srv.process is None and srv.log_path is None


def test_ready_then_clean_stop(fake):
    srv = fake(delay=0.3)
    with srv:
        assert srv.running
        with urllib.request.urlopen(srv.base_url + "/health", timeout=2) as r:
            assert r.status == 200
        pid = srv.process.pid
    assert not srv.running
    assert not _alive(pid)


def test_process_died_early_error_has_command_and_log_tail(fake):
    srv = fake(mode="die")
    with pytest.raises(ServerStartError) as err:
        srv.start()
    msg = str(err.value)
    assert "exited with code 3" in msg
    assert "fake_vllm.py" in msg  # the command
    assert "CUDA out of memory (simulated)" in msg  # the log tail
    assert not srv.running


def test_timeout_error_and_process_stopped(fake):
    srv = fake(mode="never", startup_timeout=0.8)
    t0 = time.monotonic()
    with pytest.raises(ServerStartError, match="not ready after 0.8 s") as err:
        srv.start()
    assert time.monotonic() - t0 < 5
    assert "fake vllm: starting" in str(err.value)
    assert not _alive(srv.process.pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_server_does_not_outlive_a_killed_parent(tmp_path):
    """A command's time limit SIGKILLs the process that started a server; the server (in a
    session of its own, so that stop() can end its group) must not live on holding its GPU."""
    import signal
    import subprocess

    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_SERVER)
    pid_file = tmp_path / "server.pid"
    parent = textwrap.dedent(f"""
        import pathlib, sys, time
        from vdlib.engines.serving import VLLMServer
        srv = VLLMServer("fake-model", command=[sys.executable, {str(script)!r}, "{{port}}",
                                                "0.1", "ok"], poll_interval=0.05)
        srv.start()
        pathlib.Path({str(pid_file)!r}).write_text(str(srv.process.pid))
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert pid_file.exists(), "the parent never started its server"
    server = int(pid_file.read_text())
    assert _alive(server)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
        try:  # reap it if it became our zombie (it is the init process's child, normally)
            os.waitpid(server, os.WNOHANG)
        except ChildProcessError:
            pass
    alive = _alive(server)
    if alive:
        os.kill(server, signal.SIGKILL)
    assert not alive, "the server outlived its killed parent"


def test_log_tail(tmp_path):
    p = tmp_path / "l.log"
    p.write_text("\n".join(f"line {i}" for i in range(100)))
    tail = log_tail(p, max_lines=3)
    assert tail == "line 97\nline 98\nline 99"
    assert "unreadable" in log_tail(tmp_path / "missing.log")


class _Tok:
    """Characters as ids: enough for the engine's tokenise / decode calls."""

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [[ord(c) for c in t] for t in texts]}

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def test_server_engine_generate_and_mask_args(fake):
    from vdlib.method.vocab_dropout import VocabDropout

    with fake(delay=0.0) as srv:
        engine = ServerEngine(srv.base_url, srv.model_name, _Tok(), concurrency=2)
        out = engine.generate(["ab", "abcd"], n=2, max_new_tokens=3, seed=1)
        assert [(s.prompt_index, s.sample_index) for s in out] == [(0, 0), (0, 1), (1, 0),
                                                                  (1, 1)]
        assert out[1].token_ids == [3, 3, 3] and out[2].token_ids == [4, 4, 4]
        assert out[0].finish_reason == "length" and out[0].mask_seed is None
        # the mask travels as vllm_xargs (the fake adds 100 to ids when it sees them)
        vd = VocabDropout.from_sizes(n_real=200, vocab_width=256, alpha=1.0, protected=[0])
        masked = engine.generate(["ab"], n=1, max_new_tokens=2, vocab_dropout=vd, mask_seed=7)
        assert masked[0].token_ids == [102, 102] and masked[0].mask_seed == 7
        body = engine.request_body([1], n=1, temperature=1.0, top_p=1.0, top_k=0,
                                   max_new_tokens=1, seed=0, xargs={"vd_seed": 7})
        assert body["top_k"] == 0 and body["return_token_ids"] is True
        assert json.dumps(body)  # JSON-serialisable
