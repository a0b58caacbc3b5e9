"""One collective past MPI's int counts (over 2^31 elements or bytes), on 2 ranks; run by tests/test_large_counts.py.

    hvdrun -np 2 python tests/ranks/large_counts.py CASE

Each case must give the right result on every rank. Prints "CASE: ok", "CASE: WRONG RESULT" or
"CASE: ValueError: ..." on each rank.
"""
import sys

import numpy as np

import jupyter_hvd as hvd

BIG = (1 << 31) + 1024  # just past INT_MAX
TILE = 4096
CHUNK = 1 << 28


def pattern(seed: int) -> np.ndarray:
    return ((np.arange(TILE, dtype=np.int64) * 7 + seed) % 251).astype(np.uint8)


def fill(n: int, seed: int) -> np.ndarray:
    """n bytes of a pattern that differs per seed, made without an n-element temporary."""
    out = np.empty(n, np.uint8)
    whole = n // TILE * TILE
    out[:whole].reshape(-1, TILE)[:] = pattern(seed)
    out[whole:] = pattern(seed)[:n - whole]
    return out


def same(got: np.ndarray, start: int, n: int, seed: int) -> bool:
    """Whether got[start:start + n] is fill(n, seed), checked a chunk at a time."""
    tile = pattern(seed)
    for off in range(0, n, CHUNK):  # CHUNK is a multiple of TILE: each chunk starts the pattern again
        part = got[start + off:start + min(off + CHUNK, n)]
        if not np.array_equal(part, np.resize(tile, part.size)):
            return False
    return True


def run(case: str) -> None:
    me = hvd.rank()
    if case == "allreduce_elements":  # int8, summed in place: chunked already
        x = np.ones(BIG, np.int8)
        hvd.allreduce_(x, op=hvd.Sum, name=case)
        ok = all(bool((x[o:o + CHUNK] == 2).all()) for o in range(0, BIG, CHUNK))
    elif case == "broadcast_bytes":
        x = fill(BIG, 3) if me == 0 else np.zeros(BIG, np.uint8)
        hvd.broadcast_(x, root_rank=0, name=case)
        ok = same(x, 0, BIG, 3)
    elif case == "allgather_total":  # each block below 2^31 bytes, the total above
        n = [(1 << 31) - TILE, 4 * TILE][me]
        out = hvd.allgather(fill(n, me), name=case)
        sizes = [(1 << 31) - TILE, 4 * TILE]
        ok = out.size == sum(sizes) and same(out, 0, sizes[0], 0) and same(out, sizes[0], sizes[1], 1)
    elif case == "allgather_block":  # rank 0's block alone is past 2^31 bytes
        sizes = [BIG, TILE]
        out = hvd.allgather(fill(sizes[me], me), name=case)
        ok = out.size == sum(sizes) and same(out, 0, sizes[0], 0) and same(out, sizes[0], sizes[1], 1)
    elif case == "alltoall_block":  # rank 0 sends rank 1 more than 2^31 bytes
        splits = [[TILE, BIG], [TILE, TILE]][me]
        x = np.concatenate([fill(splits[0], 10 * me), fill(splits[1], 10 * me + 1)]) if me else \
            np.concatenate([fill(TILE, 0), fill(BIG, 1)])
        out, received = hvd.alltoall(x, splits=splits, name=case)
        want = [[TILE, TILE], [BIG, TILE]][me]
        ok = list(received) == want and same(out, 0, want[0], me) and same(out, want[0], want[1], 10 + me)
    elif case == "reducescatter_elements":  # each rank's block past 2^31 elements
        x = np.ones(2 * BIG, np.int8)
        out = hvd.reducescatter(x, op=hvd.Sum, name=case)
        ok = out.size == BIG and all(bool((out[o:o + CHUNK] == 2).all()) for o in range(0, BIG, CHUNK))
    else:
        raise SystemExit(f"unknown case {case}")
    print(f"{case}: {'ok' if ok else 'WRONG RESULT'}", flush=True)


if __name__ == "__main__":
    hvd.init()
    try:
        run(sys.argv[1])
    except ValueError as e:
        print(f"{sys.argv[1]}: ValueError: {e}", flush=True)
    hvd.barrier()
    hvd.shutdown()
