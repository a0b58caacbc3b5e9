"""The hint for a tensor of the other framework given to a framework's API (a torch tensor to
``jupyter_hvd.mxnet``, say, in a job whose ranks were started with the other ``--framework``)."""
from typing import Any

FLAGS = {"mxnet": "mxnet", "torch": "torch", "numpy": "none"}  # each array's framework, as %%hvd --framework names it
KINDS = {"mxnet": "NDArrays", "torch": "tensors", "numpy": "arrays"}


def api_module(framework: str) -> str:
    """The module bound to ``hvd`` for ``%%hvd --framework`` ``framework``."""
    return {"mxnet": "jupyter_hvd.mxnet", "torch": "jupyter_hvd.torch"}.get(framework, "jupyter_hvd")


def other_framework_hint(value: Any, api: str) -> str:
    """'; ...' naming the API for ``value``'s framework when it is another than ``api``'s, else ''."""
    framework = type(value).__module__.split(".")[0]
    if framework not in FLAGS or (its := api_module(FLAGS[framework])) == api:
        return ""
    return f"; for {framework} {KINDS[framework]} use {its} (in a notebook: %%hvd -np N --framework {FLAGS[framework]})"
