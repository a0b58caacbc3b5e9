"""The CuPy that the GPU rank tests use: the real one on a GPU, or simcupy on the simulated device
(JUPYTER_HVD_TEST_SIM_GPU=1, with the engine loading engine/sim's CUDA runtime and NCCL)."""
import os

import pytest

SIMULATED = os.environ.get("JUPYTER_HVD_TEST_SIM_GPU") == "1"
if SIMULATED:
    import simcupy as cupy
else:
    cupy = pytest.importorskip("cupy")

# The side of the matrices whose products keep a stream busy: numpy does the simulated device's math.
BUSY_SIDE = 256 if SIMULATED else 2048
