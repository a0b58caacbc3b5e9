"""Batch normalisation over the whole job's batch: statistics summed over the ranks, differentiably."""
import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from ..basics import size
from .mpi_ops import Sum, allreduce


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose training-mode mean and variance are those of every rank's batch together.

    The statistics go through differentiable allreduces (two small ones per forward pass), so the input's
    gradient is that of normalising the whole batch. In eval mode, or on one rank, it is plain batch norm.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 track_running_stats: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _run_bn(self, input: torch.Tensor, factor: float) -> torch.Tensor:
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats, factor, self.eps)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        if (not self.training and self.track_running_stats) or size() == 1:
            return self._run_bn(input, factor)
        return self._sync_forward(input, factor)

    def _sync_forward(self, input: torch.Tensor, factor: float) -> torch.Tensor:
        # float16 and bfloat16 (autocast's input) in float32, as torch's own batch norm kernels do: sums and
        # counts of a large batch overflow float16; the output comes back in the input's dtype.
        x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        local = torch.cat([x.sum(dims), x.new_tensor([x.numel() // x.size(1)])])
        total = allreduce(local, op=Sum)
        count = total[-1]
        mean = total[:-1] / count
        centred = x - mean.reshape(shape)
        var = allreduce((centred * centred).sum(dims), op=Sum) / count
        y = centred * torch.rsqrt(var + self.eps).reshape(shape)
        if self.affine:
            y = y * self.weight.reshape(shape) + self.bias.reshape(shape)
        if self.training and self.track_running_stats:
            with torch.no_grad():
                n = float(count)
                self.running_mean.mul_(1 - factor).add_(mean.detach(), alpha=factor)
                self.running_var.mul_(1 - factor).add_(var.detach() * (n / max(n - 1, 1)), alpha=factor)
        return y.to(input.dtype)
