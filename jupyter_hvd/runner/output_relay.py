"""Copy a child's output stream to ours as it comes (bytes, unbuffered), keeping its last part to read after."""
from __future__ import annotations

import os
import threading
from typing import BinaryIO

CHUNK = 65536
TAIL_BYTES = 65536
JOIN_S = 2.0  # after the child ends: a process it started may still hold the stream (ssh to a lost host)


class OutputRelay:
    """A thread that copies ``source`` to the file descriptor ``dest`` until end of file."""

    def __init__(self, source: BinaryIO, dest: int):
        self._source = source
        self._dest = dest
        self._tail = bytearray()
        self._thread = threading.Thread(target=self._copy, name="hvdrun-output", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        writable = True
        while chunk := os.read(self._source.fileno(), CHUNK):
            self._tail += chunk
            del self._tail[:-TAIL_BYTES]
            view = memoryview(chunk)
            while writable and view:
                try:
                    view = view[os.write(self._dest, view):]
                except OSError:  # our output was closed (hvdrun ... | head): keep draining the child's
                    writable = False

    def tail(self) -> str:
        """The last TAIL_BYTES of the stream, once it has ended (or JOIN_S after this is called)."""
        self._thread.join(JOIN_S)
        return self._tail.decode(errors="replace")
