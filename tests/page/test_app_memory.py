"""A server that runs for weeks: its memory does not grow with the runs it serves, it keeps one run's
downloads a session, and it leaves no files behind when it stops."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from gradio_client import Client

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _resident_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


def _files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def test_two_hundred_runs_grow_the_server_by_less_than_a_tenth_after_the_first_twenty(tmp_path):
    """The app in its own process, on the bundled pair, driven through the API as a user's script would;
    stopped with Ctrl-C, as a teacher stops it. Short answers and no client-side copies of the downloads:
    what grows is the server's, and each run still makes every frame, chart and download (about 0.5 s a
    run here, against 1.3 s with 16 tokens and the client fetching every chart)."""
    port = _free_port()
    launch = f"import app; app.demo.launch(server_port={port}, quiet=True)"
    temp, cache = tmp_path / "temp", tmp_path / "gradio"
    temp.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TMPDIR": str(temp), "GRADIO_TEMP_DIR": str(cache)}
    server = subprocess.Popen([sys.executable, "-c", launch], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False, download_files=False)
                break
            except Exception:  # noqa: BLE001 - not listening yet
                assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.5)
        sizes = {}
        for run in range(1, 201):
            status = client.predict(prompt=f"w{run % 30} w{run * 7 % 30}", max_new_tokens=8, api_name="/run")[0]
            assert status.startswith("\u2705 Done"), status
            if run in (20, 200):
                sizes[run] = _resident_mb(server.pid)
        assert sizes[200] < 1.1 * sizes[20], sizes
        assert len(list(temp.glob("tabed-downloads-*/run-*"))) == 1  # the session's last run only
        server.send_signal(signal.SIGINT)
        assert server.wait(60) is not None
        assert _files(cache) and not _files(temp)  # Gradio's own copies it deletes after an hour (`delete_cache`)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        if server.poll() is None:
            server.kill()
            server.wait(30)
