"""The hint for a tensor of the other framework given to a framework's API (a torch tensor to
``jupyter_hvd.mxnet``, say, in a job whose ranks were started with the other ``--framework``)."""
from typing import Any

APIS = {"mxnet": "jupyter_hvd.mxnet", "torch": "jupyter_hvd.torch", "numpy": "jupyter_hvd"}
FLAGS = {"mxnet": "mxnet", "torch": "torch", "numpy": "none"}
KINDS = {"mxnet": "NDArrays", "torch": "tensors", "numpy": "arrays"}


def other_framework_hint(value: Any, api: str) -> str:
    """'; ...' naming the API for ``value``'s framework when it is another than ``api``'s, else ''."""
    framework = type(value).__module__.split(".")[0]
    if framework not in APIS or APIS[framework] == api:
        return ""
    return (f"; for {framework} {KINDS[framework]} use {APIS[framework]} (in a notebook: %%hvd -np N --framework "
            f"{FLAGS[framework]})")
