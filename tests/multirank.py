"""Run a command on N real MPI ranks through hvdrun, with a hard timeout: a hang fails fast."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def failure_text(out: str, tail: int = 6000) -> str:
    """A failed multi-rank run's output for its test's message: first every rank's exception and FAILED lines
    (the tail may hold only the rank that ended last, whose error is often another rank's abort), then the
    tail."""
    wanted = [line for line in out.splitlines() if line.startswith("FAILED ")
              or (line.startswith("E ") and ("Error" in line or "assert" in line))]
    errors = list(dict.fromkeys(wanted))[:60]
    return "errors of every rank:\n" + "\n".join(errors) + f"\n--- the output's last {tail} characters:\n" + out[-tail:]


def run_ranks(np_: int, args: list, timeout: float = 120, env: dict | None = None,
              check: bool = True, python: str | None = None) -> subprocess.CompletedProcess:
    """Run ``python args...`` on ``np_`` ranks; fail the test on timeout (or non-zero exit if check).
    ``python``: the ranks' interpreter (default: this one)."""
    cmd = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", str(np_), python or sys.executable, *args]
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{np_}-rank run of {args} hung for {timeout} s; output:\n{out[-6000:]}")
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, "")
    if check and proc.returncode != 0:
        pytest.fail(f"{np_}-rank run of {args} exited {proc.returncode}; {failure_text(out, 8000)}")
    return result


def run_rank_tests(np_: int, module: str | list[str], timeout: float = 180, env: dict | None = None,
                   show_output: bool = False) -> str:
    """Run the pytest module tests/ranks/<module> (or several, in order, in one job: the ranks start once and
    share one engine session) on every rank; all ranks must pass.

    ``show_output`` turns pytest's capture off, so what the engine prints reaches the result.
    """
    modules = [module] if isinstance(module, str) else module
    args = ["-m", "pytest", "-q", "-x", "--color=no", "-p", "no:cacheprovider", *(f"tests/ranks/{m}" for m in modules)]
    res = run_ranks(np_, args + (["-s"] if show_output else []), timeout=timeout, env=env)
    assert res.stdout.count(" passed") >= np_, failure_text(res.stdout, 4000)
    return res.stdout
