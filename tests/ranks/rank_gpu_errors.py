"""Bad GPU input gets a clear exception on every rank, and GPU collectives keep working after it."""
import numpy as np
import pytest

import jupyter_hvd as hvd
from device_arrays import cupy



@pytest.fixture(scope="module", autouse=True)
def pinned():
    cupy.cuda.Device(hvd.local_rank() % cupy.cuda.runtime.getDeviceCount()).use()


def still_works():
    got = hvd.allreduce(cupy.ones(3, cupy.float32), op=hvd.Sum)
    np.testing.assert_array_equal(cupy.asnumpy(got), np.full(3, hvd.size(), np.float32))


def test_non_contiguous_is_a_value_error():
    with pytest.raises(ValueError, match="contiguous"):
        hvd.allreduce(cupy.ones((4, 4), cupy.float32)[:, 1])
    still_works()


def test_scaling_needs_floats_and_sum_or_average():
    with pytest.raises(TypeError, match="floating-point"):
        hvd.allreduce(cupy.ones(3, cupy.int32), op=hvd.Sum, prescale_factor=2.0)
    with pytest.raises(ValueError, match="need op Sum or Average"):
        hvd.allreduce(cupy.ones(3, cupy.float32), op=hvd.Max, prescale_factor=2.0, name="g.bad.maxscale")
    still_works()


def test_unsupported_dtype_is_type_error():
    with pytest.raises(TypeError, match="unsupported dtype"):
        hvd.allreduce(cupy.ones(3, cupy.complex64))


@pytest.mark.parametrize("dtype", [np.int16, np.uint16], ids=str)
def test_16bit_integers_are_copied_but_not_reduced_on_the_gpu(dtype):
    with pytest.raises(TypeError, match="NCCL has no 16-bit integer type"):
        hvd.allreduce(cupy.ones(3, dtype), op=hvd.Sum, name="g.int16")
    with pytest.raises(TypeError, match="NCCL has no 16-bit integer type"):
        hvd.reducescatter(cupy.ones((hvd.size(), 2), dtype), op=hvd.Sum, name="g.int16.rs")
    got = hvd.broadcast(cupy.full(3, 20000 + hvd.rank(), dtype), root_rank=0, name="g.int16.b")
    np.testing.assert_array_equal(cupy.asnumpy(got), np.full(3, 20000, dtype))
    still_works()


def test_bad_alltoall_splits():
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(cupy.ones((3, 2), cupy.float32), splits=[5] * hvd.size())
    still_works()


def test_host_and_gpu_tensors_under_one_name_are_a_mismatch():
    if hvd.size() < 2:
        pytest.skip("needs two ranks")
    x = cupy.ones(3, cupy.float32) if hvd.rank() == 0 else np.ones(3, np.float32)
    with pytest.raises(hvd.TensorMismatchError, match="mismatched devices"):
        hvd.allreduce(x, name="g.bad.device")
    still_works()


def test_a_group_of_host_and_gpu_tensors_is_refused():
    with pytest.raises(ValueError, match="must all be on the host or all on the GPU"):
        hvd.grouped_allreduce([cupy.ones(3, cupy.float32), np.ones(3, np.float32)], name="g.bad.mixed")
    still_works()


def test_a_device_out_of_range_is_refused():
    with pytest.raises(RuntimeError, match="cannot use cuda:"):
        hvd.gpu.use_device(cupy.cuda.runtime.getDeviceCount())
    still_works()


def test_a_second_device_on_one_rank_is_refused():
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    still_works()  # claims this rank's device first
    other = (cupy.cuda.Device().id + 1) % cupy.cuda.runtime.getDeviceCount()
    with cupy.cuda.Device(other):
        x = cupy.ones(3, cupy.float32)
    with pytest.raises(ValueError, match="one GPU per rank"):
        hvd.allreduce(x)
    with pytest.raises(ValueError, match="one GPU per rank"):
        hvd.grouped_allreduce([cupy.ones(3, cupy.float32), x])
    still_works()


def test_a_rank_that_joined_before_any_gpu_op_of_its_own_cannot_stand_in_on_a_gpu():
    if hvd.size() == 1:
        pytest.skip("nobody is left to stand in for")
    hvd.shutdown()
    hvd.init()  # a fresh engine: no GPU claimed yet
    if hvd.rank() == 0:
        assert hvd.join() != 0
    else:
        with pytest.raises(hvd.HorovodInternalError, match="GPU setup failed on rank 0"):
            hvd.allreduce(cupy.ones(3, cupy.float32), name="g.join.no.gpu")
        hvd.join()
    still_works()
