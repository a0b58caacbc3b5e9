"""What the trainers' check of the ranks' parameters (jupyter_hvd.agreement) tells a rank, as the rank tests of
both frontends read it."""
import contextlib
import warnings
from typing import Iterator, List

FIRST_STEP = "the ranks hold different parameters at the first step"


@contextlib.contextmanager
def runtime_warnings() -> Iterator[List[str]]:
    """The messages of the RuntimeWarnings raised inside the block (the list fills when it ends)."""
    told: List[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield told
    told.extend(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning))


def check_replaced(told: List[str], rank: int, replaced: int) -> None:
    """Only rank ``replaced`` was told that rank 0's parameters replaced its own."""
    if rank == replaced:
        assert len(told) == 1 and f"rank {rank}'s parameters differed from rank 0's" in told[0], told
    else:
        assert not told, told


def check_first_step_warning(told: List[str], hint: str) -> None:
    """Told once, naming the broadcast that would have made the ranks agree."""
    assert len(told) == 1 and FIRST_STEP in told[0] and hint in told[0], told
