"""A %%hvd rank's process: imports the cells' API module, waits for the controller, then runs its engine.

    python -m jupyter_hvd.magic.rank_main MODULE CONNECTION_FILE TIMEOUT_S [ipengine arguments]

On one host the ranks start with the controller rather than after it, so the seconds MXNet takes to
import overlap the controller's start, and the engine starts once the controller's connection file
reads as whole JSON: the controller writes it in place, and an engine that read it half-written would
fail. Ranks on other hosts start after the controller and find the connection in IPP_CONNECTION_INFO;
the job's IPython profile folder is on the kernel's host, so they use one in the folder Open MPI gives
each rank (OMPI_FILE_LOCATION), which goes with the job.
"""
import importlib
import json
import os
import sys
import time


def whole_json(path: str) -> bool:
    """Whether ``path`` holds complete JSON (the controller writes its connection files in place)."""
    try:
        with open(path) as f:
            json.load(f)
        return True
    except (OSError, ValueError):
        return False


def wait_for_connection_file(path: str, timeout_s: float) -> None:
    """Return once ``path`` holds complete JSON, or after ``timeout_s`` (the engine then says what is missing)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not whole_json(path):
        time.sleep(0.02)


def use_profile_dir_here() -> None:
    """Point the engine at a profile folder on this host when the job's (IPP_PROFILE_DIR) is not here."""
    if os.path.isdir(os.environ.get("IPP_PROFILE_DIR", "")) or "OMPI_FILE_LOCATION" not in os.environ:
        return
    here = os.path.join(os.environ["OMPI_FILE_LOCATION"], "ipython")
    os.makedirs(here, mode=0o700, exist_ok=True)
    os.environ["IPP_PROFILE_DIR"] = here


def main() -> None:
    module, connection_file, timeout_s = sys.argv[1:4]
    del sys.argv[1:4]
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - setup_rank imports it again, and reports the error to the notebook
        pass
    if "IPP_CONNECTION_INFO" in os.environ:  # ranks on other hosts get the connection this way instead
        use_profile_dir_here()
    else:
        wait_for_connection_file(connection_file, float(timeout_s))
    from ipyparallel.engine.app import main as engine_main

    engine_main()


if __name__ == "__main__":
    main()
