"""The CuPy that the GPU rank tests use: the real one on a GPU, or simcupy on the simulated device
(JUPYTER_HVD_TEST_SIM_GPU=1, with the engine loading engine/sim's CUDA runtime, driver and NCCL)."""
import os

import pytest

SIMULATED = os.environ.get("JUPYTER_HVD_TEST_SIM_GPU") == "1"
if SIMULATED:
    import simcupy as cupy
else:
    cupy = pytest.importorskip("cupy")

# The side of the matrices whose products keep a stream busy: numpy does the simulated device's math.
BUSY_SIDE = 256 if SIMULATED else 2048


class DLPackOnly:
    """A device tensor that offers DLPack but not __cuda_array_interface__ (as JAX arrays do)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


# jupyter_hvd builds results for a DLPackOnly input with the from_dlpack of this module.
from_dlpack = cupy.from_dlpack
