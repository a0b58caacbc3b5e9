"""Checks that a frontend keeps Horovod's API: its functions' signatures and the names it exports."""
import functools
import inspect
from types import ModuleType
from typing import Sequence, Union

# What horovod.torch and horovod.mxnet both export besides their collectives.
COMMON_EXPORTS = ("init shutdown is_initialized size local_size cross_size rank local_rank cross_rank "
                  "mpi_threads_supported mpi_enabled mpi_built gloo_enabled gloo_built nccl_built ddl_built ccl_built "
                  "cuda_built rocm_built start_timeline stop_timeline Average Sum Adasum Min Max Product ProcessSet "
                  "global_process_set add_process_set remove_process_set Compression").split()

# What Horovod's frontends' mpi_ops modules carry besides their collectives: code imports these from there
# (``from horovod.torch.mpi_ops import Average, size``; ``from horovod.mxnet.mpi_ops import allreduce_, size``).
MPI_OPS_BASICS = [n for n in COMMON_EXPORTS if n != "Compression"]


def check_submodules(package: str, submodules: dict) -> None:
    """Each ``package.submodule`` exists and has the names Horovod's has (``submodules``: name -> names)."""
    import importlib

    missing = {sub: [n for n in names if not hasattr(importlib.import_module(f"{package}.{sub}"), n)]
               for sub, names in submodules.items()}
    assert not any(missing.values()), missing


def check_signature(hvd: ModuleType, name: str, specs: Sequence[Union[str, tuple]]) -> None:
    """``hvd.name`` (a dotted name reaches into submodules: ``elastic.run``) takes Horovod's parameters in order with its defaults (``specs``: a name, or (name, default),
    a default given as a string naming one of the module's objects); extras only after them, with defaults."""
    named = {"global_process_set": hvd.global_process_set, "Average": hvd.Average,
             "Compression.none": hvd.Compression.none}
    target = functools.reduce(getattr, name.split("."), hvd)
    params = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    assert [p.name for p in params[:len(specs)]] == [s if isinstance(s, str) else s[0] for s in specs]
    assert all(p.default is not inspect.Parameter.empty for p in params[len(specs):])
    for p, spec in zip(params, specs):
        if isinstance(spec, str):
            assert p.default is inspect.Parameter.empty, p
        else:
            want = named.get(spec[1], spec[1]) if isinstance(spec[1], str) else spec[1]
            assert p.default is want or p.default == want, (p, want)
