"""Launchers that start training ranks under Open MPI's mpiexec."""


def __getattr__(name: str):
    """``run``, as ``horovod.runner.run`` is ``horovod.run``; imported when first used."""
    if name == "run":
        from .run_function import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
