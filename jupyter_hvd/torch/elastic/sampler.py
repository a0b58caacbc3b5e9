"""ElasticSampler: a DistributedSampler that remembers which samples this epoch has seen, so that a training run
restored from a commit goes on with the samples left."""
import math
from typing import Iterator, List, Set

import torch
import torch.utils.data

from ...basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Shares ``dataset``'s indices out among the ranks (shuffled by ``seed`` and the epoch, the same on every
    rank), leaving out those recorded as processed this epoch. Call ``record_batch`` after each batch, keep the
    sampler in a ``TorchState`` (its commit gathers every rank's record) and call ``set_epoch`` at the end of
    each epoch."""

    def __init__(self, dataset, shuffle: bool = True, seed: int = 0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices: Set[int] = set()
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
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx: int, batch_size: int) -> None:
        """Record the indices of this rank's batch ``batch_idx`` (of ``batch_size``) as processed."""
        self.record_indices(set(self.get_indices(batch_idx, batch_size)))

    def record_indices(self, indices: Set[int]) -> None:
        self.processed_indices.update(indices)

    def get_indices(self, batch_idx: int, batch_size: int) -> List[int]:
        """This rank's indices in batch ``batch_idx`` of ``batch_size`` of the current iteration."""
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self) -> dict:
        return dict(epoch=self.epoch, processed_indices=self.processed_indices)

    def load_state_dict(self, state_dict: dict) -> None:
        self.epoch = state_dict["epoch"]
        self.processed_indices = state_dict["processed_indices"]
        self.reset()

    def reset(self) -> None:
        """Share the indices not yet processed among the job's ranks."""
        self.num_replicas = size()
        self.rank = rank()
        self.remaining_indices = [i for i in range(len(self.dataset)) if i not in self.processed_indices]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        indices = self.remaining_indices
        if self.shuffle:
            order = torch.Generator()
            order.manual_seed(self.seed + self.epoch)
            indices = [indices[i] for i in torch.randperm(len(indices), generator=order).tolist()]
        if indices:  # as many for every rank, repeating the first where fewer are left than ranks
            indices = (indices * math.ceil(self.total_size / len(indices)))[:self.total_size]
        self.indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self) -> int:
        return self.num_samples
