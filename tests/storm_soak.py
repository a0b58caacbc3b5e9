"""make soak: long storms (tests/ranks/storm) at 2, 3 and 4 ranks, each seed's ops/s in a table.

    .venv/bin/python tests/storm_soak.py [--ops 100000] [--ranks 2 3 4] [--seed S] [--gpu]

A run that fails prints its output and the command that replays it, and the soak goes on with the next;
the exit status is 1 if any failed. The last line is one JSON object with every run's figures.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(np_: int, seed: int, ops: int, gpu: bool, timeout: float) -> dict:
    """One storm; its STORM_RESULT figures, or the failure."""
    args = ["-m", "storm", "--seed", str(seed), "--ops", str(ops)]
    if gpu:
        args += ["--gpu", str(ROOT / "build" / "engine")]
    cmd = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", str(np_), sys.executable, *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "ranks"), PYTHONUNBUFFERED="1")
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out, code = f"{e.stdout or ''}{e.stderr or ''}\n(killed after {timeout:.0f} s)", -1
    for line in out.splitlines():
        if line.startswith("STORM_RESULT "):
            return json.loads(line[len("STORM_RESULT "):])
    replay = f"PYTHONPATH=tests/ranks .venv/bin/hvdrun -np {np_} .venv/bin/python {' '.join(args)}"
    print(out[-6000:], file=sys.stderr)
    print(f"soak: the storm failed (exit {code}) after {time.monotonic() - start:.0f} s; replay: {replay}",
          file=sys.stderr)
    return {"seed": seed, "ranks": np_, "gpu": gpu, "ops": ops, "failed": True}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=int, default=100000, help="ops per storm (per rank count)")
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--seed", type=int, default=None, help="default: a new one each time (printed)")
    p.add_argument("--gpu", action="store_true", help="also run ops on the simulated GPU (make sim-gpu)")
    p.add_argument("--timeout", type=float, default=4 * 3600, help="seconds for one storm")
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1, 1 << 31)
    results = []
    print(f"{'ranks':>5} {'gpu':>4} {'seed':>11} {'ops':>8} {'seconds':>8} {'ops/s':>7}", flush=True)
    for np_ in args.ranks:
        r = run(np_, seed + np_, args.ops, args.gpu, args.timeout)
        results.append(r)
        if r.get("failed"):
            print(f"{np_:>5} {'yes' if args.gpu else 'no':>4} {seed + np_:>11} {args.ops:>8}   FAILED", flush=True)
        else:
            print(f"{np_:>5} {'yes' if args.gpu else 'no':>4} {r['seed']:>11} {r['ops']:>8} {r['seconds']:>8.1f} "
                  f"{r['ops_per_s']:>7.0f}", flush=True)
    print(json.dumps({"soak": results}), flush=True)
    return 1 if any(r.get("failed") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
