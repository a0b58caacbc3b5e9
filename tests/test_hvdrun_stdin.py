"""hvdrun running a Python program read from its standard input on every rank (``python - < train.py``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from hvdrun_cli import PRINT_RANK, clean_env, hvdrun_argv, rank_lines, run_hvdrun

from jupyter_hvd.runner.stdin_program import MAX_PROGRAM_BYTES, from_stdin, stdin_position

pytestmark = pytest.mark.timeout(120)

# Each rank reduces its rank, and says what it was run as; rank 1 then fails on the program's line 6.
TRAIN = """import sys
import numpy as np
import jupyter_hvd as hvd
hvd.init()
print("rank", hvd.rank(), sys.argv, hvd.allreduce(np.array([hvd.rank()]), op=hvd.Sum)[0], flush=True)
assert hvd.rank() == 0, sorted(name for name in globals() if not name.startswith("__"))
"""
# What a program can see of how it was run; it ends in a traceback.
SELF_REPORT = """import sys
print(sys.argv, __name__, __doc__, sorted(globals()), "\xe9t\xe9", repr(__spec__), sys.path[0] == "")
def fail():
    raise ValueError("at line 4")
fail()
""".encode()


@pytest.mark.parametrize(("command", "terminal", "position"), [
    (["python", "-"], True, 1),
    (["python", "-u", "-W", "ignore", "-", "--lr", "0.1"], True, 4),
    (["/usr/bin/python3.11", "--", "-"], True, 2),
    (["python3"], False, 1),  # no program named, standard input a file or a pipe: Python reads it
    (["python3", "-u"], True, None),  # ... a terminal: an interactive session, as without hvdrun
    (["python", "train.py"], False, None),
    (["python", "-m", "train"], False, None),
    (["python", "-c", "print(1)"], False, None),
    (["python", "-mtrain"], False, None),
    (["python", "--version"], False, None),
    (["bash", "-"], False, None),
])
def test_where_a_command_reads_its_program_from_standard_input(command: list[str], terminal: bool,
                                                               position: int | None) -> None:
    assert stdin_position(command, terminal) == position


def test_other_commands_and_their_standard_input_are_left_alone() -> None:
    stdin = io.BytesIO(b"data for rank 0")
    assert from_stdin(["python", "train.py"], stdin, False) == ["python", "train.py"]
    assert stdin.read() == b"data for rank 0"


def test_the_rewritten_command_runs_the_program_as_python_runs_standard_input() -> None:
    """The same output, traceback and exit status as ``python - a`` given the same bytes."""
    own = subprocess.run([sys.executable, "-", "a"], input=SELF_REPORT, capture_output=True, timeout=60)
    command = from_stdin([sys.executable, "-", "a"], io.BytesIO(SELF_REPORT), False)
    ours = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert b"['-', 'a'] __main__ None" in own.stdout and "\xe9t\xe9".encode() in own.stdout
    assert b'File "<stdin>", line 4, in fail' in own.stderr
    assert (ours.returncode, ours.stdout, ours.stderr) == (own.returncode, own.stdout, own.stderr)


def test_every_rank_runs_the_program() -> None:
    """Before, rank 1 ran an empty program (mpiexec gives standard input to rank 0 only), and rank 0 waited
    for it in hvd.init() forever."""
    result = run_hvdrun("-np", "2", sys.executable, "-", "--lr", "0.1", stdin=TRAIN)
    assert "rank 0 ['-', '--lr', '0.1'] 1" in result.stdout, result.stderr
    assert "rank 1 ['-', '--lr', '0.1'] 1" in result.stdout, result.stderr
    assert 'File "<stdin>", line 6, in <module>' in result.stderr
    assert "AssertionError: ['hvd', 'np', 'sys']" in result.stderr
    assert result.returncode == 1


def test_a_program_too_long_for_the_command_line_is_refused_with_why() -> None:
    program = "x = 1\n" * (MAX_PROGRAM_BYTES // 6 + 1)
    result = run_hvdrun("-np", "2", sys.executable, "-", stdin=program)
    assert result.returncode == 2
    assert "bytes, more than" in result.stderr and "save it to a file" in result.stderr


def test_a_job_started_with_standard_input_closed_runs_and_shows_its_output() -> None:
    """hvdrun raised AttributeError reading the closed input; before that, the job's output pipes took fd 0 and
    the ranks' lines were lost."""
    result = subprocess.run(hvdrun_argv("-np", "2", sys.executable, "-c", PRINT_RANK), env=clean_env(),
                            preexec_fn=lambda: os.close(0), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert rank_lines(result.stdout) == ["rank 0 2", "rank 1 2"], result.stderr
