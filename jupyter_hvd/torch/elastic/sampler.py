"""ElasticSampler: a DistributedSampler that counts the samples an epoch has processed, so that a training run
restored from a commit goes on with the samples left, in the same order."""
import math
import random
from typing import Iterator, List

import torch
import torch.utils.data

from ...basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Shares ``dataset``'s indices out among the ranks, shuffled by ``seed`` and the epoch (the same order on
    every rank, and as Horovod 0.28 shuffles them), leaving out the first ``processed_num`` of that order. Call
    ``record_batch`` after each batch, keep the sampler in a ``TorchState`` and call ``set_epoch`` at the end of
    each epoch."""

    def __init__(self, dataset, shuffle: bool = True, seed: int = 0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.indices: List[int] = []
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices: List[int] = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` with nothing processed (call it at the end of an epoch, not the start, so that
        an epoch cut short does not see its samples again)."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx: int, batch_size: int) -> None:
        """Count a batch of ``batch_size`` on every rank as processed."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self) -> dict:
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def load_state_dict(self, state_dict: dict) -> None:
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self) -> None:
        """Share the indices not yet processed among the job's ranks."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        indices = self.remaining_indices
        if indices:  # as many for every rank, repeating the first where fewer are left than ranks
            indices = (indices * math.ceil(self.total_size / len(indices)))[:self.total_size]
        self.indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self) -> int:
        return self.num_samples
