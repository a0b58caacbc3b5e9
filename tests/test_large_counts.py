"""Collectives past MPI's int counts (2^31 elements or bytes) on 2 ranks: the right result or a ValueError on
every rank, never a wrong result, a crash or a hang. Each needs gigabytes: skipped where memory is short."""
import os

import psutil
import pytest

from multirank import run_ranks

GIB = 1 << 30
# case -> GiB the two ranks need together at their peak
CASES = {"allreduce_elements": 4.5, "broadcast_bytes": 4.5, "allgather_total": 6.5, "allgather_block": 6.5,
         "alltoall_block": 4.5, "reducescatter_elements": 13}
# Open MPI takes int counts, and the engine still casts larger ones to int in these (issue 17, section 5):
# one rank gets MPI_ERR_COUNT, the other waits inside MPI for ever. Until that is fixed they run only with
# JUPYTER_HVD_LARGE_COUNTS_ALL=1 (each would otherwise spend the test's timeout hanging in every CI run).
COUNT_OVERFLOW = pytest.mark.skipif(os.environ.get("JUPYTER_HVD_LARGE_COUNTS_ALL") != "1",
                                    reason="32-bit MPI counts in allgather/alltoall/reducescatter hang (issue 17, "
                                           "section 5); JUPYTER_HVD_LARGE_COUNTS_ALL=1 runs it")
pytestmark = pytest.mark.timeout(900)


@pytest.mark.parametrize("case", [
    "allreduce_elements", "broadcast_bytes", "allgather_total",
    pytest.param("allgather_block", marks=COUNT_OVERFLOW), pytest.param("alltoall_block", marks=COUNT_OVERFLOW),
    pytest.param("reducescatter_elements", marks=COUNT_OVERFLOW)])
def test_past_int_counts_right_or_a_value_error(case):
    need = CASES[case] * GIB * 1.2
    have = psutil.virtual_memory().available
    if have < need:
        pytest.skip(f"needs {need / GIB:.1f} GiB of free memory, {have / GIB:.1f} GiB available")
    res = run_ranks(2, ["tests/ranks/large_counts.py", case], timeout=600, check=False)
    lines = [line for line in res.stdout.splitlines() if line.startswith(f"{case}: ")]
    assert res.returncode == 0 and len(lines) == 2, res.stdout[-4000:]
    outcomes = {line.split(": ")[1] for line in lines}  # "ok", "ValueError" or "WRONG RESULT"
    assert outcomes in ({"ok"}, {"ValueError"}), res.stdout[-4000:]
