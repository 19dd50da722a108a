"""`make lab` in a real headless browser: the server starts at the repository root and a
notebook page renders (slow; needs Debian's chromium: `apt-get install chromium`).

Run: ``.venv/bin/python -m pytest -m slow tests/test_lab.py``. The screenshot goes to
``$VDLIB_LAB_SCREENSHOT`` when set (docs/results/lab_quickstart.png was made this way), else to
the test's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Flags for a closed network (no background connections, no sandbox as root).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
                  "--virtual-time-budget=25000"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install "
                                 "chromium)")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, server: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stdout.read()
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"JupyterLab did not answer at {url}")


def _chromium(args: list[str], profile: Path) -> str:
    out = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                         capture_output=True, text=True, timeout=180)
    return out.stdout


def test_make_lab_serves_a_notebook_page(tmp_path):
    port, token = _free_port(), "vdlib-lab-check"
    args = (f"--no-browser --port {port} --IdentityProvider.token={token} "
            "--ServerApp.allow_root=True")
    server = subprocess.Popen(["make", "lab", f"LAB_ARGS={args}"], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(f"{base}/api/status?token={token}", server)
        page = f"{base}/lab/tree/notebooks/00_quickstart.ipynb?token={token}"
        dom = _chromium(["--dump-dom", page], tmp_path / "profile-dom")
        # the notebook is open in a notebook panel with its title cell and parameters cell
        assert "jp-NotebookPanel" in dom and "00_quickstart.ipynb" in dom
        assert "Quickstart: vocabulary dropout" in dom and "papermill injects" in dom
        shot = Path(os.environ.get("VDLIB_LAB_SCREENSHOT", tmp_path / "lab.png"))
        _chromium([f"--screenshot={shot}", page], tmp_path / "profile-shot")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
