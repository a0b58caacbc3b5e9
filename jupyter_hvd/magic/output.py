"""Live per-rank output: each rank's growing stdout/stderr becomes whole lines prefixed ``[rank k]``."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

STREAMS = ("stdout", "stderr")


class RankOutput:
    """Relays new text from per-rank AsyncResults to the notebook, holding partial lines until their newline."""

    def __init__(self, ranks: int, only_rank: int | None = None):
        self.only_rank = only_rank
        self._seen = {(rank, name): 0 for rank in range(ranks) for name in STREAMS}
        self._partial = {key: "" for key in self._seen}

    def poll(self, results: Sequence[Any]) -> None:
        """Print the complete lines that arrived since the last poll."""
        for rank, result in enumerate(results):
            for name in STREAMS:
                text = result.metadata.get(name) or ""
                key = (rank, name)
                new, self._seen[key] = text[self._seen[key]:], len(text)
                if new:
                    *lines, self._partial[key] = (self._partial[key] + new).split("\n")
                    self._write(rank, name, lines)

    def flush(self) -> None:
        """Print what is left of unterminated lines, once a cell is over."""
        for (rank, name), rest in self._partial.items():
            if rest:
                self._write(rank, name, [rest])
            self._partial[(rank, name)] = ""

    def _write(self, rank: int, name: str, lines: list[str]) -> None:
        if not lines or self.only_rank not in (None, rank):
            return
        stream = sys.stdout if name == "stdout" else sys.stderr
        stream.write("".join(f"[rank {rank}] {line}\n" for line in lines))
        stream.flush()
