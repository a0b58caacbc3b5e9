"""jupyter_hvd.torch on real GPUs: CUDA tensors through NCCL, ranks sharing a GPU through host staging,
training on cuda, and a %%hvd cell that trains on its rank's GPU. Skipped, with the reason, without a GPU
(the simulated device of tests/test_gpu.py covers the engine's stream logic in CI; torch cannot use it)."""
import os

import pytest

from multirank import run_rank_tests

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]


def _skip_reason() -> str:
    import jupyter_hvd as hvd

    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    status = hvd.gpu_status()
    return "" if status["nccl_available"] else f"jupyter_hvd cannot use NCCL here: {status['reason']}"


@pytest.fixture(autouse=True)
def _needs_a_gpu():
    if reason := _skip_reason():
        pytest.skip(reason)


def test_one_rank_through_nccl():
    run_rank_tests(1, "rank_torch_gpu.py", env={"OMP_NUM_THREADS": "1"})


def test_two_ranks_sharing_one_gpu_stage_through_the_host():
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    run_rank_tests(2, "rank_torch_gpu.py", env={"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": first})


def test_two_ranks_with_a_gpu_each():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, {torch.cuda.device_count()} visible")
    run_rank_tests(2, "rank_torch_gpu.py", env={"OMP_NUM_THREADS": "1"})


def test_hvd_cell_trains_on_the_gpu(ip, capsys):
    ip.run_cell_magic("hvd", "-np 1 --framework torch", """
import torch
import torch.nn.functional as F
model = torch.nn.Linear(8, 2).to("cuda")
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(torch.randn(4, 8, device="cuda")), torch.zeros(4, dtype=torch.long, device="cuda")).backward()
    opt.step()
print("trained on", next(model.parameters()).device, "current", torch.cuda.current_device())
""")
    out = capsys.readouterr().out
    assert "trained on cuda:0 current 0" in out, out
