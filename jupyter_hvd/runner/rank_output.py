"""One rank of ``hvdrun --output-filename DIR``: run its command, and copy what it prints both to the
console (through mpiexec, as without the flag) and to DIR/rank.<N>/stdout and DIR/rank.<N>/stderr.

    python -m jupyter_hvd.runner.rank_output DIR COMMAND...

N is the rank in MPI_COMM_WORLD, zero-padded so the folders sort in rank order (Horovod's layout).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from jupyter_hvd.runner.child import die_with_parent, wait_relaying
from jupyter_hvd.runner.launch import rank_place

CHUNK = 1 << 16


def rank_folder(root: str, environ: Mapping[str, str]) -> Path:
    """DIR/rank.<N> for the rank mpiexec started this process as."""
    place = rank_place(environ)
    width = len(str(max(place.size - 1, 0)))
    return Path(root) / f"rank.{place.rank:0{width}d}"


def _copy(source: BinaryIO, console: BinaryIO, path: Path) -> threading.Thread:
    """Copy source to console and to a new file at path, chunk by chunk, as the child writes."""

    def pump() -> None:
        with path.open("wb", buffering=0) as log:
            while chunk := os.read(source.fileno(), CHUNK):
                log.write(chunk)
                console.write(chunk)
                console.flush()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> int:
    """Run argv[1:] as this rank with its output teed under argv[0]; its exit status."""
    if len(argv) < 2:
        print("usage: python -m jupyter_hvd.runner.rank_output DIR COMMAND...", file=sys.stderr)
        return 2
    folder = rank_folder(argv[0], os.environ)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # on another host than hvdrun's, which checks its own first
        print(f"hvdrun: --output-filename: cannot make {folder} on {socket.gethostname()}: {exc.strerror}",
              file=sys.stderr)
        return 1
    # A SIGKILL of this wrapper (mpiexec's last resort) also ends the rank.
    die = die_with_parent(signal.SIGKILL) if sys.platform == "linux" else None
    try:
        proc = subprocess.Popen(argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die)
    except OSError as exc:
        print(f"hvdrun: cannot run {argv[1]!r}: {exc}", file=sys.stderr)
        return 127
    pumps = [_copy(proc.stdout, sys.stdout.buffer, folder / "stdout"),
             _copy(proc.stderr, sys.stderr.buffer, folder / "stderr")]
    code = wait_relaying(proc)
    for pump in pumps:
        pump.join()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
