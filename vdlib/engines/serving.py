"""A vLLM OpenAI-compatible server owned by vdlib, and a generation engine over it.

:class:`VLLMServer` starts ``python -m vllm.entrypoints.openai.api_server`` as a child process
in its own process group, on a free port of 127.0.0.1 chosen by the operating system (no fixed
ports), with the vdlib logits processor loaded (``--logits-processors
vdlib.engines.vllm_backend:VocabDropoutLogitsProcessor``, see :mod:`vdlib.engines.vllm_backend`),
and waits until ``GET /health`` and ``GET /v1/models`` answer. If the process exits first, or the
startup timeout passes, :class:`ServerStartError` names the command and quotes the tail of the
server's log file. :meth:`VLLMServer.stop` ends only that process group (SIGTERM, then SIGKILL
after a grace period); nothing is found or killed by name.

:class:`ServerEngine` implements :class:`vdlib.engines.generation.GenerationEngine` over the
server's ``/v1/completions`` endpoint: prompts go as token ids (tokenised here without special
tokens, as :class:`~vdlib.engines.generation.HFEngine` and
:class:`~vdlib.engines.vllm_engine.VLLMEngine` do), the mask as ``vllm_xargs``
(:func:`vdlib.engines.vllm_backend.extra_args`), the generated ids come back through
``return_token_ids``, and a masked call ends with
:func:`vdlib.engines.vllm_engine.check_no_dropped`.

The command builder (:func:`server_command`) and the process handling need no vLLM: the unit
tests run a fake server script.

>>> cmd = server_command("Qwen/Qwen3-4B-Base", port=8123, gpu_memory_utilization=0.85,
...                      max_model_len=4096, python="python")
>>> cmd[:3], cmd[cmd.index("--port") + 1], cmd[cmd.index("--logits-processors") + 1]
(['python', '-m', 'vllm.entrypoints.openai.api_server'], '8123', \
'vdlib.engines.vllm_backend:VocabDropoutLogitsProcessor')
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from vdlib.engines import generation
from vdlib.engines.generation import Sample
from vdlib.engines.vllm_backend import extra_args
from vdlib.engines.vllm_engine import check_no_dropped
from vdlib.method.seeding import derive_seed

__all__ = ["PROCESSOR", "ServerStartError", "free_port", "server_command", "VLLMServer",
           "ServerEngine", "log_tail"]

logger = logging.getLogger(__name__)

PROCESSOR = "vdlib.engines.vllm_backend:VocabDropoutLogitsProcessor"
LOCALHOST = "127.0.0.1"


class ServerStartError(RuntimeError):
    """The server process exited before it was ready, or did not get ready in time."""


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that is free on ``host`` now (the OS picks it: bind to port 0).

    The port is released before it is returned, so another process could take it before the
    server binds it; the server then exits with "address in use", which :class:`VLLMServer`
    reports like any other early exit.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def server_command(model: str, *, port: int, host: str = LOCALHOST,
                   gpu_memory_utilization: float | None = 0.9,
                   max_model_len: int | None = None, dtype: str | None = None,
                   served_model_name: str | None = None, seed: int | None = None,
                   logits_processors: Sequence[str] = (PROCESSOR,),
                   generation_config: str | None = "vllm",
                   extra: Sequence[str] = (), python: str | None = None) -> list[str]:
    """The argv that starts vLLM's OpenAI-compatible server for ``model``.

    ``generation_config="vllm"`` stops vLLM from taking default sampling parameters (top-k,
    min-p, repetition penalty) from the checkpoint's ``generation_config.json``, so a request
    samples with exactly the parameters vdlib sends (None: vLLM's own default, "auto").
    ``extra`` is appended verbatim (any other ``vllm serve`` option).
    """
    if not model:
        raise ValueError("model is empty; pass a Hub id or a local checkpoint folder")
    if not 0 < port < 65536:
        raise ValueError(f"port = {port}; allowed: 1..65535")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization = {gpu_memory_utilization}; allowed: (0, 1]")
    if max_model_len is not None and max_model_len < 1:
        raise ValueError(f"max_model_len = {max_model_len}; allowed: >= 1")
    cmd = [python or sys.executable, "-m", "vllm.entrypoints.openai.api_server",
           "--model", str(model), "--host", host, "--port", str(port)]
    if served_model_name:
        cmd += ["--served-model-name", served_model_name]
    if gpu_memory_utilization is not None:
        cmd += ["--gpu-memory-utilization", str(gpu_memory_utilization)]
    if max_model_len is not None:
        cmd += ["--max-model-len", str(max_model_len)]
    if dtype:
        cmd += ["--dtype", dtype]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if generation_config:
        cmd += ["--generation-config", generation_config]
    if logits_processors:
        cmd += ["--logits-processors", *logits_processors]
    return cmd + [str(a) for a in extra]


def log_tail(path: str | Path, max_lines: int = 40, max_chars: int = 4000) -> str:
    """The last ``max_lines`` lines (at most ``max_chars`` characters) of a log file."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError as err:
        return f"<log {path} unreadable: {err}>"
    tail = "\n".join(text.splitlines()[-max_lines:])
    return tail[-max_chars:] if tail else "<log is empty>"


def _get(url: str, timeout: float) -> tuple[int, bytes]:
    """Status and body of a GET (status 0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (local URL)
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as err:
        return int(err.code), b""
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, b""



def _parent_death_signal() -> Callable[[], None] | None:
    """On Linux, a function for ``Popen(preexec_fn=...)`` that has the kernel send the server
    SIGTERM when the process that started it dies, however it dies (SIGKILL, a command's time
    limit, an out-of-memory kill): a server in a session of its own would otherwise live on,
    holding its GPU memory (measured: a 56.8 GiB orphan on an H200 made the next solver stage
    run out of memory). The signal follows the starting *thread*, so it is set only when the
    main thread starts the server (every vdlib stage does); elsewhere, and off Linux, None."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not \
            threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:  # in the child, between fork and exec
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm

class VLLMServer:
    """A vLLM server process started, health-checked and stopped by vdlib.

    >>> with VLLMServer("Qwen/Qwen3-4B-Base", gpu=1, max_model_len=4096) as srv:  # doctest: +SKIP
    ...     engine = ServerEngine(srv.base_url, srv.model_name, tokenizer)

    ``gpu`` sets ``CUDA_VISIBLE_DEVICES`` for the child only (e.g. training on GPU 0 and
    generation on GPU 1, the paper's split); every other variable of the parent's environment
    is inherited (NCCL settings included), ``env`` adds to it. ``command`` replaces the vLLM
    argv (tests, wrappers): ``{host}`` and ``{port}`` in its items are filled in. The log
    (stdout and stderr of the server) goes to ``log_path`` or a temporary file kept for the
    error message.
    """

    def __init__(self, model: str, *, gpu: int | str | None = None,
                 gpu_memory_utilization: float | None = 0.9, max_model_len: int | None = None,
                 dtype: str | None = None, served_model_name: str | None = None,
                 seed: int | None = None, logits_processors: Sequence[str] = (PROCESSOR,),
                 extra: Sequence[str] = (), host: str = LOCALHOST, port: int | None = None,
                 startup_timeout: float = 900.0, poll_interval: float = 1.0,
                 stop_timeout: float = 30.0, log_path: str | Path | None = None,
                 env: Mapping[str, str] | None = None,
                 command: Sequence[str] | None = None) -> None:
        if startup_timeout <= 0:
            raise ValueError(f"startup_timeout = {startup_timeout}; allowed: > 0")
        self.model = model
        self.model_name = served_model_name or model
        self.host = host
        self.port = int(port) if port is not None else free_port(host)
        self.gpu = gpu
        self.startup_timeout = startup_timeout
        self.poll_interval = poll_interval
        self.stop_timeout = stop_timeout
        self.extra_env = dict(env or {})
        if command is None:
            self.command = server_command(
                model, port=self.port, host=host, gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len, dtype=dtype, served_model_name=served_model_name,
                seed=seed, logits_processors=logits_processors, extra=extra)
        else:
            self.command = [str(c).format(host=host, port=self.port) for c in command]
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self.process: subprocess.Popen | None = None

    # ------------------------------------------------------------------ properties

    @property
    def base_url(self) -> str:
        """``http://host:port`` (the OpenAI client's ``base_url`` is this + ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def describe(self) -> str:
        """The command as one shell-quoted line (for messages)."""
        return subprocess.list2cmdline(self.command)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> VLLMServer:
        """Start the process and wait until it is ready (see :meth:`wait_ready`)."""
        self.start_process()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def start_process(self) -> VLLMServer:
        """Start the process without waiting (several servers then load in parallel; call
        :meth:`wait_ready` next)."""
        if self.process is not None:
            raise RuntimeError("this server was already started; make a new VLLMServer")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="vdlib-vllm-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        env = {**os.environ, **self.extra_env}
        if "VLLM_ENABLE_V1_MULTIPROCESSING" not in self.extra_env:
            # vdlib's in-process engines set it to 0 in this process; a server runs its engine
            # core in its own process, as vLLM's server expects
            env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        logger.info("starting vLLM server on %s (log %s): %s", self.base_url, self.log_path,
                    self.describe())
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env,
                                            start_new_session=True,
                                            preexec_fn=_parent_death_signal())
        return self

    def _failure(self, why: str) -> ServerStartError:
        tail = log_tail(self.log_path) if self.log_path is not None else "<no log>"
        return ServerStartError(f"vLLM server {why}.\ncommand: {self.describe()}\n"
                                f"log ({self.log_path}), last lines:\n{tail}")

    def wait_ready(self) -> None:
        """Poll ``/health`` then ``/v1/models`` until both answer 200; raise
        :class:`ServerStartError` if the process exits or ``startup_timeout`` passes."""
        if self.process is None:
            raise RuntimeError("start() the server first")
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise self._failure(f"exited with code {code} before it was ready")
            if _get(self.base_url + "/health", timeout=5.0)[0] == 200:
                status, body = _get(self.base_url + "/v1/models", timeout=5.0)
                if status == 200 and self._serves_model(body):
                    logger.info("vLLM server ready on %s", self.base_url)
                    return
            if time.monotonic() >= deadline:
                raise self._failure(f"was not ready after {self.startup_timeout:g} s")
            time.sleep(self.poll_interval)

    def _serves_model(self, body: bytes) -> bool:
        try:
            data = json.loads(body)
            ids = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
        except (ValueError, AttributeError):
            return False
        if ids and self.model_name not in ids:
            raise self._failure(f"serves {ids}, not {self.model_name!r}")
        return bool(ids)

    def stop(self) -> None:
        """End the server's process group: SIGTERM, then SIGKILL after ``stop_timeout`` s."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, self.stop_timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)  # its own group: start_new_session made pgid == pid
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                logger.warning("vLLM server (pid %d) did not stop on %s", proc.pid, sig.name)
        else:
            raise RuntimeError(f"vLLM server process group {proc.pid} survived SIGKILL")
        try:  # workers left in the group after the leader exited
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        logger.info("vLLM server on %s stopped (code %s)", self.base_url, proc.returncode)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# ----------------------------------------------------------------------------- client engine


def _parse_choice(choice: Any, where: str) -> tuple[int, list[int], str, str]:
    """(index, token_ids, text, finish_reason) of one completion choice (server output is
    untrusted: every field is checked)."""
    if not isinstance(choice, dict):
        raise RuntimeError(f"{where}: a choice is not an object: {choice!r:.200}")
    index, ids, reason = choice.get("index"), choice.get("token_ids"), choice.get("finish_reason")
    if not isinstance(index, int) or isinstance(index, bool):
        raise RuntimeError(f"{where}: choice index {index!r:.50} is not an integer")
    if ids is None:
        raise RuntimeError(f"{where}: the server returned no token_ids; vLLM >= 0.10.2 is "
                           "needed (request field return_token_ids)")
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                            for t in ids):
        raise RuntimeError(f"{where}: token_ids is not a list of integers")
    if reason not in ("stop", "length"):
        raise RuntimeError(f"{where}: finish_reason {reason!r:.50}")
    text = choice.get("text")
    return index, ids, text if isinstance(text, str) else "", reason


class ServerEngine(generation.BatchedGenerate):
    """:class:`vdlib.engines.generation.GenerationEngine` over a vLLM server's ``/v1/completions``.

    One request per prompt, sent ``concurrency`` at a time (the server batches them); prompt
    ``i`` gets the seed ``derive_seed(seed, "vllm", i)``, as in
    :class:`~vdlib.engines.vllm_engine.VLLMEngine`, so the samples match the offline engine's for
    the same model and vLLM build. Greedy (``temperature == 0``) sends ``n = 1`` and copies the
    completion ``n`` times. The server must load the vdlib processor (:class:`VLLMServer` does);
    a masked call that gets a dropped id back raises.
    """

    PROCESSOR_HINT = ("transformers logits processors cannot run inside a vLLM server; "
                      "load vLLM processors with --logits-processors")

    def __init__(self, base_url: str | Sequence[str], model: str, tokenizer: Any, *,
                 concurrency: int = 64, timeout: float = 3600.0) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency = {concurrency}; allowed: >= 1")
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("base_url is empty; pass one server URL or a list of them")
        # several servers of the same model (one per GPU): request i goes to urls[i % len]
        self.base_urls = [u.rstrip("/") for u in urls]
        self.base_url = self.base_urls[0]
        self.model = model
        self.tokenizer = tokenizer
        self.concurrency = concurrency
        self.timeout = timeout

    def _post(self, body: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        req = urllib.request.Request((url or self.base_url) + "/v1/completions",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                data = json.loads(resp.read())
        except urllib.error.HTTPError as err:
            detail = err.read()[:500].decode("utf-8", errors="replace")
            raise RuntimeError(f"vLLM server answered HTTP {err.code}: {detail}") from err
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise RuntimeError(f"vLLM server answer has no choices: {str(data)[:200]}")
        return data

    def request_body(self, prompt_ids: list[int], *, n: int, temperature: float, top_p: float,
                     top_k: int, max_new_tokens: int, seed: int,
                     xargs: dict[str, Any] | None) -> dict[str, Any]:
        """The JSON body of one prompt's completions request."""
        body: dict[str, Any] = {
            "model": self.model, "prompt": prompt_ids, "n": n, "temperature": temperature,
            "top_p": top_p, "top_k": top_k, "max_tokens": max_new_tokens,
            "seed": seed, "return_token_ids": True, "skip_special_tokens": True,
        }
        if xargs:
            body["vllm_xargs"] = xargs
        return body

    def generate_batches(self, batches: Sequence[generation.GenerationBatch], *,
                         temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                         max_new_tokens: int = 256) -> list[list[Sample]]:
        """Every batch's requests in flight together (``concurrency`` at a time), each batch
        with its own seeds and mask: the samples of one :meth:`generate` call per batch."""
        greedy = temperature == 0
        requests: list[tuple[int, int, int, str]] = []  # (batch, prompt index, seed, prompt)
        bodies: list[dict[str, Any]] = []
        for bi, b in enumerate(batches):
            generation.check_generate_args(b.prompts, b.n, temperature, top_p, top_k,
                                           max_new_tokens)
            if (b.vocab_dropout is None) != (b.mask_seed is None):
                raise ValueError("vocab_dropout and mask_seed go together: pass both or neither")
            xargs = extra_args(b.vocab_dropout, b.mask_seed, flat=True) \
                if b.vocab_dropout is not None else None
            enc = self.tokenizer(list(b.prompts), add_special_tokens=False)["input_ids"] \
                if b.prompts else []
            for pi, (prompt, ids) in enumerate(zip(b.prompts, enc, strict=True)):
                s = derive_seed(b.seed, "vllm", pi)
                requests.append((bi, pi, s, prompt))
                bodies.append(self.request_body(list(ids), n=1 if greedy else b.n,
                                                temperature=temperature, top_p=top_p,
                                                top_k=top_k, max_new_tokens=max_new_tokens,
                                                seed=s, xargs=xargs))
        answers: list[dict[str, Any]] = []
        if bodies:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(bodies))) as pool:
                urls = [self.base_urls[i % len(self.base_urls)] for i in range(len(bodies))]
                answers = list(pool.map(self._post, bodies, urls))
        result: list[list[Sample]] = [[] for _ in batches]
        for (bi, pi, s, prompt), data in zip(requests, answers, strict=True):
            n = batches[bi].n
            parsed = sorted(_parse_choice(c, f"prompt {pi}") for c in data["choices"])
            if [p[0] for p in parsed] != list(range(1 if greedy else n)):
                raise RuntimeError(f"prompt {pi}: choice indices {[p[0] for p in parsed]}")
            for si in range(n):
                _, ids, _, reason = parsed[0 if greedy else si]
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                result[bi].append(Sample(prompt, pi, si, ids, text, reason, s,
                                         batches[bi].mask_seed))
        for b, samples in zip(batches, result, strict=True):
            if b.vocab_dropout is not None:
                check_no_dropped(samples, b.vocab_dropout)
        logger.debug("vLLM server: %d batches, %d samples", len(batches), sum(map(len, result)))
        return result
