"""Run inside a Slurm allocation (salloc ... python slurm_notebook.py): a Jupyter kernel started here, as by a
Jupyter server in the allocation, runs %%hvd -np 4 with no hosts given; prints what each cell showed, as JSON."""
import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
from test_kernel import Kernel  # noqa: E402

CELLS = ["%load_ext jupyter_hvd",
         "%%hvd -np 4 --framework none\nimport socket\nprint('on', socket.gethostname(), hvd.local_rank())",
         "%hvd status"]

if __name__ == "__main__":
    kernel = Kernel()
    try:
        for cell in CELLS:
            reply, out = kernel.execute(cell, timeout=240)
            print(json.dumps({"cell": cell, "status": reply["status"], "output": out}), flush=True)
    finally:
        kernel.close()
