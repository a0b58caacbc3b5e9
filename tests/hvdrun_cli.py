"""Running hvdrun from this checkout in the tests, with a timeout and without the user's root opt-in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 60
PRINT_RANK = (
    "import os; "
    "print('rank', os.environ['OMPI_COMM_WORLD_RANK'], os.environ['OMPI_COMM_WORLD_SIZE'])"
)
PRINT_ENV = (
    "import os, sys; names = sys.argv[1:]; "
    "print(' '.join(f'{n}={os.environ.get(n, \"<unset>\")}' for n in names))"
)

def clean_env(**extra: str) -> dict[str, str]:
    """Environment for hvdrun: this repo importable, no run-as-root opt-in, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def hvdrun_argv(*args: str) -> list[str]:
    """Command line that runs hvdrun from this checkout."""
    return [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", *args]


def run_hvdrun(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run hvdrun to completion, its standard input ``stdin`` (else empty), and capture its output."""
    return subprocess.run(
        hvdrun_argv(*args),
        env=env or clean_env(),
        input=stdin or "",
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def rank_lines(stdout: str) -> list[str]:
    """Sorted 'rank R S' lines from the ranks' output."""
    return sorted(line for line in stdout.splitlines() if line.startswith("rank "))


def running(pid: int) -> bool:
    """Whether process pid still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
