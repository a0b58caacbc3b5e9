"""Cutting a model's gradients into the fused groups of the optimizers' ``num_groups``/``groups``."""
from typing import Any, List, Sequence


def split_list(items: Sequence[Any], n: int) -> List[Sequence[Any]]:
    """``items`` cut into ``n`` contiguous chunks whose sizes differ by at most one."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]
