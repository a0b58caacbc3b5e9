"""Horovod's build checks that its frontends carry (``hvd.check_extension``, ``hvd.gpu_available``).

Horovod's ``horovod.torch`` and ``horovod.mxnet`` import these from ``horovod.common.util``, so scripts reach
them as ``hvd.check_extension`` and ``hvd.gpu_available``. One jupyter_hvd build serves every frontend: the
engine is the one compiled extension (``jupyter_hvd._C``), and CUDA and NCCL are loaded at run time.
"""
import importlib.util
import os
import sysconfig


def extension_path(pkg_path: str, *args: str) -> str:
    """Where a compiled extension lives: ``args`` is its path below ``pkg_path``'s folder, without the
    platform suffix (``check_extension(..., __file__, "sub", "_lib")`` names ``sub/_lib.cpython-...so``)."""
    if not args:
        raise ValueError("check_extension: name the extension (its path below pkg_path's folder)")
    return os.path.join(os.path.dirname(pkg_path), *args[:-1], args[-1] + sysconfig.get_config_var("EXT_SUFFIX"))


def check_extension(ext_name: str, ext_env_var: str, pkg_path: str, *args: str) -> None:
    """Raise ImportError when the compiled extension ``args`` (see extension_path) is missing, as Horovod does.

    ``ext_name`` names it in the message and ``ext_env_var`` is the build switch the message tells the
    reader to set when reinstalling (Horovod's ``HOROVOD_WITH_PYTORCH``; jupyter_hvd has no such switch:
    ``pip install .`` always builds its one extension).
    """
    path = extension_path(pkg_path, *args)
    if not os.path.exists(path):
        raise ImportError(f"Extension {ext_name} has not been built: {path} not found\n"
                          f"If this is not expected, reinstall with {ext_env_var}=1 to debug the build error.")


def gpu_available(ext_base_name: str, verbose: bool = False) -> bool:
    """Whether frontend ``ext_base_name`` ("torch", "mxnet", "tensorflow") can run collectives on a GPU here.

    "torch": torch is installed, sees a CUDA device, and the engine loads the CUDA runtime
    (``jupyter_hvd.gpu_status()`` says why not). "mxnet": False, jupyter_hvd.mxnet reduces CPU arrays
    only. Any other name: False, there is no such frontend. ``verbose`` prints why the answer is False.
    """
    from .gpu import cuda_available, gpu_status

    if ext_base_name == "torch":
        if importlib.util.find_spec("torch") is None:
            why = "torch is not installed"
        else:
            import torch

            why = ("torch sees no CUDA device" if not torch.cuda.is_available()
                   else "" if cuda_available() else gpu_status()["reason"])
    elif ext_base_name == "mxnet":
        why = "jupyter_hvd.mxnet reduces CPU arrays only"
    else:
        why = f"jupyter_hvd has no {ext_base_name!r} frontend"
    if why and verbose:
        print(f"gpu_available({ext_base_name!r}): False: {why}")
    return not why
