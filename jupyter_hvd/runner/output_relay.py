"""Copies mpiexec's output to hvdrun's as it comes, and hands hvdrun its last part when it ends.

    python output_relay.py OUT_FD ERR_FD TAIL_FD MPIEXEC_PID

A process of its own, started as a plain script (it needs only the standard library, so it starts in
milliseconds): were hvdrun killed, mpiexec could still write its output while it stops the ranks (with
nobody reading, its writes would fail and it would die leaving them running). OUT_FD and ERR_FD are the read
ends of mpiexec's stdout and stderr, copied to this process's stdout and stderr; when both end, their last
TAIL_BYTES go to TAIL_FD. A process that mpiexec started may hold them open after it ends (ssh to a host that
was lost): JOIN_S after mpiexec has ended, what has come is enough.
"""
import os
import signal
import sys
import threading

CHUNK = 65536
TAIL_BYTES = 65536
JOIN_S = 2.0
POLL_S = 0.2


def copy(source: int, dest: int, tail: bytearray) -> None:
    """Copy source to dest until end of file, keeping the last TAIL_BYTES in tail; keep draining source if
    dest is closed (hvdrun ... | head)."""
    writable = True
    while chunk := os.read(source, CHUNK):
        tail += chunk
        del tail[:-TAIL_BYTES]
        view = memoryview(chunk)
        while writable and view:
            try:
                view = view[os.write(dest, view):]
            except OSError:
                writable = False


def running(pid: int) -> bool:
    """Whether pid runs (a zombie, ended but not yet reaped by hvdrun, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def main() -> None:
    out_fd, err_fd, tail_fd, mpiexec = (int(a) for a in sys.argv[1:5])
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # for mpiexec to act on, not this
        signal.signal(signum, signal.SIG_IGN)
    tails = [bytearray(), bytearray()]
    copies = [threading.Thread(target=copy, args=(source, dest, tail), daemon=True)
              for source, dest, tail in ((out_fd, 1, tails[0]), (err_fd, 2, tails[1]))]
    for thread in copies:
        thread.start()
    while running(mpiexec) and any(t.is_alive() for t in copies):  # till both outputs end, or mpiexec does
        next(t for t in copies if t.is_alive()).join(POLL_S)  # returns as soon as that copy ends
    for thread in copies:
        thread.join(JOIN_S)
    with os.fdopen(tail_fd, "wb") as out:
        out.write(bytes(tails[0] + tails[1]))


if __name__ == "__main__":
    main()
