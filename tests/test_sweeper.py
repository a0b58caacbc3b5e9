"""What a %%hvd job of a kernel that is gone left behind is swept by the next job: processes, then folders."""
import os
import subprocess
import sys
import tempfile

import pytest

from jupyter_hvd.magic.reaper import TAG
from jupyter_hvd.magic.sweeper import sweep

pytestmark = pytest.mark.timeout(60)


def job_process(folder) -> subprocess.Popen:
    """A process of the job whose folder is ``folder``, as the ones %%hvd starts are tagged."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, TAG: str(folder)})


def test_the_processes_and_folder_of_a_job_whose_kernel_is_gone_are_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # sweep this test's folder, not the machine's
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"jupyter-hvd-{gone.pid}.x1"
    mine = tmp_path / f"jupyter-hvd-{os.getpid()}.x2"
    other = tmp_path / "jupyter-hvd-abcdef"  # not named for its kernel: left alone
    for folder in (stale, mine, other):
        folder.mkdir()
    orphan, running = job_process(stale), job_process(mine)
    try:
        assert sweep() == [str(stale)]
        orphan.wait(timeout=10)  # ended (TimeoutExpired otherwise)
        assert running.poll() is None and mine.is_dir() and other.is_dir()
    finally:
        for p in (orphan, running):
            p.kill()
            p.wait()
