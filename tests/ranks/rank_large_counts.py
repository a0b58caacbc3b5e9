"""Buffers past what one MPI call takes (an int's count) go in pieces, or as point-to-point blocks, with the
same results. JUPYTER_HVD_TEST_MPI_MAX_COUNT lowers the limit so that small tensors take those paths."""
import os

import numpy as np
import pytest

import jupyter_hvd as hvd

LIMIT = int(os.environ.get("JUPYTER_HVD_TEST_MPI_MAX_COUNT", 2**31 - 1))
UNIT = LIMIT if LIMIT < 2**20 else 64  # sizes scale with a lowered limit; without one they stay small


def rows_of(rank: int) -> int:
    """Uneven first dimensions: with a lowered limit, some blocks and offsets pass it and some do not."""
    return [3 * UNIT // 8 + 5, 1, 0, UNIT + 3][rank % 4]


def test_allgather_and_alltoall_past_the_limit():
    n, me = hvd.size(), hvd.rank()
    x = np.arange(rows_of(me) * 3, dtype=np.int32).reshape(-1, 3) + 1000 * me
    got = hvd.allgather(x, name="big.allgather")
    want = np.concatenate([np.arange(rows_of(r) * 3, dtype=np.int32).reshape(-1, 3) + 1000 * r for r in range(n)])
    np.testing.assert_array_equal(got, want)
    splits = [(rows_of(me + k) % 7) + k * (UNIT // 4) for k in range(n)]  # some blocks past the limit
    src = np.random.default_rng(me).integers(0, 100, (sum(splits), 2)).astype(np.int64)
    out, received = hvd.alltoall(src, splits=splits, name="big.alltoall")
    theirs = [[(rows_of(r + k) % 7) + k * (UNIT // 4) for k in range(n)] for r in range(n)]
    parts = []
    for r in range(n):
        start = sum(theirs[r][:me])
        parts.append(np.random.default_rng(r).integers(0, 100, (sum(theirs[r]), 2)).astype(np.int64)
                     [start:start + theirs[r][me]])
    np.testing.assert_array_equal(out, np.concatenate(parts))
    assert list(received) == [theirs[r][me] for r in range(n)]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16])
def test_reductions_and_broadcast_past_the_limit(dtype):
    n = hvd.size()
    count = 5 * UNIT // 2 + 7
    x = np.full(count, hvd.rank() + 1, dtype)
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, name=f"big.ar.{np.dtype(dtype)}"),
                                  np.full(count, n * (n + 1) // 2, dtype))
    rows = n * (UNIT // 3 + 2) + 1
    rs = hvd.reducescatter(np.ones((rows, 3), dtype), op=hvd.Sum, name=f"big.rs.{np.dtype(dtype)}")
    mine = rows // n + (1 if hvd.rank() < rows % n else 0)
    np.testing.assert_array_equal(rs, np.full((mine, 3), n, dtype))
    b = hvd.broadcast(np.full(count, hvd.rank(), dtype), root_rank=n - 1, name=f"big.bcast.{np.dtype(dtype)}")
    np.testing.assert_array_equal(b, np.full(count, n - 1, dtype))

