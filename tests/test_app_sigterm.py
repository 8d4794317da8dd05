"""Stopping the dashboard with SIGTERM: a clean exit (no "Exception ignored in atexit callback ... SystemExit"),
background jobs stopped, and the `pelab-dash-*` job-cache folder removed -- also while a job is running and when a
second SIGTERM arrives during the cleanup."""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict:
    (tmp / "tmp").mkdir()
    return dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp / "tmp"), OMP_NUM_THREADS="1")


def _caches(tmp: Path) -> list[Path]:
    return sorted((tmp / "tmp").glob("pelab-dash-*"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_workbench_app_sigterm_exits_cleanly_and_removes_its_cache(tmp_path):
    port = _free_port()
    (tmp_path / "runs").mkdir()  # `app` serves an existing store, never creates one
    p = subprocess.Popen([sys.executable, "-c", "from workbench.cli import main; main()", "app", "--port",
                          str(port), "--root", str(tmp_path / "runs")], cwd=REPO, env=_env(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):  # start-up (imports) on a loaded machine
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except OSError:
                assert p.poll() is None, p.communicate()[1]
                time.sleep(0.5)
        assert len(_caches(tmp_path)) == 1
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM
    assert "Exception ignored" not in err and "Traceback" not in err and "SystemExit" not in err, err
    assert _caches(tmp_path) == []


JOB = """
import sys, time
from apps import create_app
app = create_app(sys.argv[1])
manager = app._background_manager
def job(key, progress_key, args, context):
    time.sleep(300)
    manager.handle.set(key, "x" * 100_000)  # a large value: diskcache would re-create the folder for it
print(manager.call_job_fn("k", job, (), {}), flush=True)
time.sleep(300)
"""


def test_sigterm_with_a_running_job_stops_it_and_removes_the_cache(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", JOB, str(tmp_path / "runs")], cwd=REPO, env=_env(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job = int(p.stdout.readline())
        assert _alive(job) and len(_caches(tmp_path)) == 1
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)  # impatient user: must not interrupt the cleanup
        _, err = p.communicate(timeout=60)  # the job sleeps 300 s: the app must not wait for it
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM
    assert "Exception ignored" not in err and "Traceback" not in err and "SystemExit" not in err, err
    time.sleep(0.5)
    assert not _alive(job)
    assert _caches(tmp_path) == []
