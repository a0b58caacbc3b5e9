"""What the trainers' check of the ranks' parameters (jupyter_hvd.agreement) tells a rank, as the rank tests of
both frontends read it."""
import contextlib
import os
import warnings
from typing import Iterator, List

FIRST_STEP = "the ranks hold different parameters at the first step"


@contextlib.contextmanager
def runtime_warnings() -> Iterator[List[str]]:
    """The messages of the RuntimeWarnings raised inside the block (the list fills when it ends). Each is shown
    at the rank test's own line that called the step, not inside jupyter_hvd or the framework."""
    told: List[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield told
    mine = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    told.extend(str(w.message) for w in mine)
    here = os.path.dirname(os.path.abspath(__file__))
    assert all(os.path.dirname(os.path.abspath(w.filename)) == here for w in mine), [(w.filename, w.lineno)
                                                                                      for w in mine]


def check_replaced(told: List[str], rank: int, replaced: int) -> None:
    """Only rank ``replaced`` was told that rank 0's parameters replaced its own."""
    if rank == replaced:
        assert len(told) == 1 and f"rank {rank}'s parameters differed from rank 0's" in told[0], told
    else:
        assert not told, told


def check_first_step_warning(told: List[str], hint: str) -> None:
    """Told once, naming the broadcast that would have made the ranks agree."""
    assert len(told) == 1 and FIRST_STEP in told[0] and hint in told[0], told
