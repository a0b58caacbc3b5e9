"""A job's launchers read their process's output whole, at any time: while it runs, and after ipyparallel has
handled its exit, which in ipyparallel's own launchers removes the file (launchers.py)."""
import os
import sys
import time

import pytest

from jupyter_hvd.magic.launchers import ControllerLauncher

# Prints a line, waits for the test to create a file, prints another: no timing is assumed.
SCRIPT = ("import os, sys, time\nprint('first', flush=True)\n"
          "while not os.path.exists(sys.argv[1]):\n    time.sleep(0.01)\nprint('second', flush=True)\n")


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        time.sleep(0.01)


@pytest.mark.timeout(120)
def test_the_output_is_whole_while_the_process_runs_and_after_its_exit_is_handled(tmp_path):
    go = tmp_path / "go"
    launcher = ControllerLauncher(work_dir=str(tmp_path), profile_dir=str(tmp_path),
                                  controller_cmd=[sys.executable, "-c", SCRIPT, str(go)])
    launcher.start()
    try:
        wait_for(lambda: "first" in launcher.get_output(), "the first line")
        assert launcher.get_output() == "first\n"
        go.touch()
        wait_for(lambda: not launcher.process.is_running(), "the exit")
        # what ipyparallel's event loop does when it learns of the exit: log the output, remove=True
        launcher.notify_stop({"exit_code": 0, "pid": launcher.pid, "identifier": launcher.identifier})
        assert launcher.state == "after"
        assert launcher.get_output() == "first\nsecond\n"
        assert launcher.get_output(remove=True) == "first\nsecond\n" == launcher.get_output()
        assert os.path.exists(launcher.output_file), "removed: a reader racing the removal finds no output"
    finally:
        if launcher.process.is_running():
            launcher.process.kill()
