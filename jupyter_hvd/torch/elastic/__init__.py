"""``hvd.elastic`` of ``jupyter_hvd.torch``: Horovod's elastic training API for PyTorch (``run``, ``TorchState``,
``ElasticSampler``) on a job whose ranks are fixed; see ``jupyter_hvd.elastic`` for what that changes."""
from ...elastic import run
from .sampler import ElasticSampler
from .state import TorchState

__all__ = ["ElasticSampler", "TorchState", "run"]
