"""What HOROVOD_AUTOTUNE gains: training throughput under the default fusion threshold and cycle time,
against the settings the autotuner settles on for the same workload, in the same run.

    python benchmarks/autotune_bench.py [--np 2] [--settings 12]

Workloads (MXNet, one compute thread per rank): cnn, mxnet_train.py's small CNN with DistributedTrainer;
resnet50, every ResNet-50 parameter array allreduced in place per step. Each runs as two hvdrun jobs:
defaults, then HOROVOD_AUTOTUNE=1, where training runs until rank 0's autotuner has settled before the
timed steps. Prints a table and one JSON line per job.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mxnet_train  # noqa: E402

MAX_TUNING_STEPS = 5000


def settled(hvd) -> bool:
    """Whether rank 0's autotuner has finished, as every rank learns from rank 0, once the steps pushed
    so far have run (MXNet runs them asynchronously, and the broadcast depends on none of them)."""
    import mxnet as mx

    mx.nd.waitall()
    busy = mx.nd.array([1.0 if hvd.metrics()["autotuning"] else 0.0])
    return hvd.broadcast(busy, root_rank=0, name="autotune.busy").asscalar() == 0


def worker(workload: str, timed_steps: int) -> None:
    import mxnet as mx

    import jupyter_hvd.mxnet as hvd

    hvd.init()
    if workload == "cnn":
        step, samples = mxnet_train.cnn_step(hvd), mxnet_train.BATCH
    else:
        step, samples = mxnet_train.resnet50_allreduce(hvd)[0], 1
    tuning_steps = 0
    while tuning_steps < MAX_TUNING_STEPS and not (tuning_steps % 20 == 0 and settled(hvd)):
        step()
        tuning_steps += 1
    rates = []
    for _ in range(3):
        mx.nd.waitall()
        start = time.perf_counter()
        for _ in range(timed_steps):
            step()
        mx.nd.waitall()
        rates.append(timed_steps / (time.perf_counter() - start))
    m = hvd.metrics()
    if hvd.rank() == 0:
        print(json.dumps({"workload": workload, "np": hvd.size(), "autotune": os.environ.get("HOROVOD_AUTOTUNE") == "1",
                          "steps_per_s": max(rates), "samples_per_s": max(rates) * samples * hvd.size(),
                          "tuning_steps": tuning_steps, "settings_tried": m["autotune_settings"],
                          "fusion_threshold_mb": m["fusion_threshold"] / 2**20,
                          "cycle_time_ms": m["cycle_time_ms"]}), flush=True)
    hvd.shutdown()


def job(workload: str, n: int, tune: bool, settings: int, timed_steps: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MXNET_CPU_WORKER_NTHREADS="1", PYTHONWARNINGS="ignore")
    if tune:
        env.update(HOROVOD_AUTOTUNE="1", HOROVOD_AUTOTUNE_WARMUP_SAMPLES="1", HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE="5",
                   HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=str(settings))
    cmd = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", str(n), sys.executable, __file__, "--worker",
           workload, "--timed-steps", str(timed_steps)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if res.returncode:
        sys.exit(f"{workload} np={n} autotune={tune} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return next(json.loads(line) for line in res.stdout.splitlines() if line.startswith("{"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--settings", type=int, default=12, help="settings the autotuner tries")
    p.add_argument("--worker", choices=["cnn", "resnet50"], help=argparse.SUPPRESS)
    p.add_argument("--timed-steps", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.timed_steps)
    lines = []
    for workload, timed_steps in (("cnn", 100), ("resnet50", 10)):
        base = job(workload, args.np, False, args.settings, timed_steps)
        tuned = job(workload, args.np, True, args.settings, timed_steps)
        for row in (base, tuned):
            print(json.dumps(row), flush=True)
        lines.append(f"{workload:<9} np={args.np}: defaults ({base['fusion_threshold_mb']:.0f} MB, "
                     f"{base['cycle_time_ms']:.1f} ms) {base['steps_per_s']:.1f} steps/s; autotuned "
                     f"({tuned['fusion_threshold_mb']:.1f} MB, {tuned['cycle_time_ms']:.2f} ms, after "
                     f"{tuned['tuning_steps']} steps) {tuned['steps_per_s']:.1f} steps/s; "
                     f"ratio {tuned['steps_per_s'] / base['steps_per_s']:.2f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
