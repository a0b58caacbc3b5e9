"""A Python program read from hvdrun's standard input, given to every rank.

mpiexec gives its standard input to rank 0 only (the others read /dev/null), so under
``hvdrun -np 2 python - < train.py`` rank 1 would run an empty program and exit at once, and
rank 0 would wait for it in ``hvd.init()`` forever. (Open MPI 5's ``--stdin all`` aborts.)
hvdrun reads such a program itself and gives it to each rank on the command line, to a few lines of
``python -c`` that put it in an in-memory file, make that the process's standard input, and exec the
command: each rank runs exactly ``python - < train.py``.
"""

from __future__ import annotations

import os
from typing import BinaryIO

# Python's options that take a value as the next argument; every other option before the script stands alone.
_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})
# Python's options that print and exit without reading a program.
_NO_PROGRAM = frozenset({"-h", "-?", "--help", "--help-env", "--help-xoptions", "--help-all", "-V", "--version"})
# Linux's limit on one argument (MAX_ARG_STRLEN); a longer program cannot travel on the command line.
MAX_PROGRAM_BYTES = 32 * 4096 - 1
# Run with the program, then the command, as its arguments.
RUN_WITH_STDIN = ("import os, sys; fd = os.memfd_create('stdin'); os.write(fd, os.fsencode(sys.argv[1])); "
                  "os.lseek(fd, 0, os.SEEK_SET); os.dup2(fd, 0); os.execvp(sys.argv[2], sys.argv[2:])")


def _is_python(executable: str) -> bool:
    name = os.path.basename(executable)
    return name.startswith("python") and not name.endswith("-config")


def stdin_position(command: list[str], stdin_is_terminal: bool) -> int | None:
    """Where ``command`` (a Python interpreter and its arguments) names standard input as its program: the
    index of its ``-``, or len(command) when it names no program and standard input is not a terminal; None
    when it runs a file, a module or ``-c`` code, reads no program, or is not Python."""
    if not command or not _is_python(command[0]):
        return None
    i = 1
    while i < len(command):
        arg = command[i]
        if arg == "-":
            return i
        if not arg.startswith("-") or arg.startswith(("-c", "-m")) or arg in _NO_PROGRAM:
            return None
        if arg == "--":  # the end of the options: the program, if any, follows
            after = command[i + 1:i + 2]
            return i + 1 if after == ["-"] or not after and not stdin_is_terminal else None
        i += 2 if arg in _WITH_VALUE else 1
    return None if stdin_is_terminal else len(command)


def from_stdin(command: list[str], stdin: BinaryIO, stdin_is_terminal: bool) -> list[str]:
    """``command`` to run on each rank: where it reads a Python program from ``stdin``, the command run with
    the program read as its standard input; any other command as it is. ValueError when the program is too
    long to travel."""
    at = stdin_position(command, stdin_is_terminal)
    if at is None:
        return command
    source = stdin.read()
    if len(source) > MAX_PROGRAM_BYTES:
        raise ValueError(f"the program read from standard input is {len(source):,} bytes, more than "
                         f"{MAX_PROGRAM_BYTES:,} can be given to every rank; save it to a file and run that")
    return [command[0], "-c", RUN_WITH_STDIN, os.fsdecode(source), *command]
