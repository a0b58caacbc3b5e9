"""The storm (tests/ranks/storm): a seeded randomized differential test of the engine, at 2, 3 and 4 ranks,
on the host, on the simulated GPU and through jupyter_hvd.torch, plus checks of its own model and failure
report.

Each run is a few thousand ops; ``make soak`` runs long ones. JUPYTER_HVD_STORM_SEED picks another seed,
JUPYTER_HVD_STORM_OPS another length, JUPYTER_HVD_STORM_PYTHON the ranks' interpreter (make test-asan).
"""
import os
import re
import sys

import numpy as np
import pytest

from multirank import ROOT, run_ranks
from sanitizer_leaks import our_leaks

sys.path.insert(0, str(ROOT / "tests" / "ranks"))
from storm import model  # noqa: E402
from storm.features import FEATURES, resolve  # noqa: E402
from storm.plan import Op, Planner  # noqa: E402

OPS = int(os.environ.get("JUPYTER_HVD_STORM_OPS", "3000"))
SEED = int(os.environ.get("JUPYTER_HVD_STORM_SEED", "17"))
PYTHON = os.environ.get("JUPYTER_HVD_STORM_PYTHON") or None
SIM_DIR = os.environ.get("JUPYTER_HVD_SIM_GPU_DIR", str(ROOT / "build" / "engine"))
pytestmark = pytest.mark.timeout(1200)


def storm(np_: int, *flags: str, ops: int = OPS, seed: int = SEED, check: bool = True, timeout: float = 1100):
    """Runs one storm; on failure the message has the command that replays it."""
    args = ["-m", "storm", "--seed", str(seed), "--ops", str(ops), *flags]
    res = run_ranks(np_, args, timeout=timeout, env={"PYTHONPATH": str(ROOT / "tests" / "ranks")},
                    check=False, python=PYTHON)
    replay = f"PYTHONPATH=tests/ranks .venv/bin/hvdrun -np {np_} .venv/bin/python {' '.join(args)}"
    if check and (res.returncode != 0 or "STORM_RESULT" not in res.stdout):
        pytest.fail(f"the storm failed (exit {res.returncode}); replay: {replay} (--trace prints every step; a "
                    f"rank that failed on its own printed the op and a shorter replay)\n{res.stdout[-12000:]}")
    leaked = our_leaks(res.stdout)  # under make test-asan: LeakSanitizer's reports of our allocations
    if check and (leaked or "nanobind: leaked" in res.stdout):
        pytest.fail(f"the storm leaked memory ({replay}):\n" + "\n".join(leaked)[-8000:] + res.stdout[-3000:])
    return res


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_storm_on_the_host(np_):
    storm(np_, seed=SEED + np_)


@pytest.mark.parametrize("np_, devices", [(2, 2), (3, 1)], ids=["nccl", "staged"])
def test_storm_with_the_simulated_gpu(np_, devices):
    missing = [lib for lib in ("libjhvd_sim_cudart.so", "libjhvd_sim_nccl.so", "libjhvd_sim_cuda.so")
               if not os.path.isfile(os.path.join(SIM_DIR, lib))]
    if missing:
        pytest.skip(f"the simulated GPU is not built ({', '.join(missing)} not in {SIM_DIR}; make sim-gpu)")
    storm(np_, "--gpu", SIM_DIR, "--gpu-devices", str(devices), seed=SEED + 10 * np_, ops=OPS // 2)


@pytest.mark.parametrize("np_", [2, 3])
def test_storm_on_torch_tensors(np_):
    """The same kinds of plan through jupyter_hvd.torch on CPU tensors, views and bfloat16 included."""
    pytest.importorskip("torch")
    storm(np_, "--torch", seed=SEED + 20 * np_, ops=OPS // 2)


def test_a_failure_names_the_seed_and_op_and_how_to_replay_it():
    res = storm(2, "--corrupt", "40", ops=300, check=False, timeout=300)
    assert res.returncode != 0, res.stdout[-3000:]
    found = re.search(r"FAILURE at op (\d+): .*\n.*Mismatch: .* differ", res.stdout)
    assert found, res.stdout[-3000:]
    index = found.group(1)
    assert int(index) >= 40
    assert f"--seed {SEED} --ops 300 --stop-after {index}" in res.stdout, res.stdout[-3000:]


def test_the_plan_depends_on_the_seed_alone():
    def steps(seed, n=400):
        planner = Planner(seed, 3, resolve(), gpu=True)
        out = []
        for s in planner.steps():
            out.append(s.describe() if isinstance(s, Op) else repr(s))
            if len(out) == n:
                return out
    assert steps(5) == steps(5)
    assert steps(5) != steps(6)


def test_every_feature_is_known_and_on_by_default():
    assert resolve() == resolve(["all"]) == set(FEATURES)
    assert resolve(disable=["sets"]) == set(FEATURES) - {"sets"}
    with pytest.raises(ValueError, match="unknown storm feature"):
        resolve(["no_such_feature"])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_the_model_allows_rounding_but_not_an_error_of_one_input(dtype):
    from storm.data import dtype_of

    rng = np.random.default_rng(0)
    ins = [rng.uniform(-8, 8, 1000).astype(dtype_of(dtype)) for _ in range(4)]
    for op in (model.SUM, model.AVERAGE, model.MIN, model.MAX, model.PRODUCT):
        want, bound = model.reduce_float(np.stack(ins), op, 0.5, 3.0, dtype)
        got = want.astype(dtype_of(dtype))  # rounded once: within the bound
        model.check_reduce(got, ins, op, 0.5, 3.0, "t")
        wrong = np.stack(ins)[:3] if op != model.MIN else np.stack(ins)[1:]  # one rank's input left out
        bad, _ = model.reduce_float(wrong, op, 0.5, 3.0, dtype)
        with pytest.raises(model.Mismatch):
            model.check_reduce(bad.astype(dtype_of(dtype)), ins, op, 0.5, 3.0, "t")


def test_the_model_is_exact_for_integers_wrapping_as_numpy_does():
    ins = [np.array([100, -100, 7, -7], np.int8), np.array([100, -100, 2, 2], np.int8)]
    model.check_reduce(np.array([-56, 56, 9, -5], np.int8), ins, model.SUM, 1.0, 1.0, "t")
    model.check_reduce(np.array([-28, 28, 4, -2], np.int8), ins, model.AVERAGE, 1.0, 1.0, "t")  # toward zero
    with pytest.raises(model.Mismatch):
        model.check_reduce(np.array([127, -128, 9, -5], np.int8), ins, model.SUM, 1.0, 1.0, "t")  # saturated
