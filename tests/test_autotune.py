"""HOROVOD_AUTOTUNE on real ranks: rank 0 tries settings while training runs, logs each, keeps the best."""
import csv
import json

import pytest

from multirank import run_ranks

pytestmark = pytest.mark.timeout(300)

SETTINGS = 5
# One warm-up setting, then SETTINGS measured ones, 3 samples of 2 steps each; then some steps more.
STEPS = (1 + SETTINGS) * 3 * 2 + 10


def tune(tmp_path, np_, **env):
    log = tmp_path / "autotune.csv"
    env = {"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": str(log), "HOROVOD_TIMELINE": str(tmp_path / "tl.json"),
           "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
           "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": str(SETTINGS), "HOROVOD_LOG_LEVEL": "info", **env}
    out = run_ranks(np_, ["tests/ranks/autotune_steps.py", str(STEPS)], env=env).stdout
    metrics = json.loads(next(line for line in out.splitlines() if line.startswith("METRICS "))[8:])
    with log.open() as f:
        rows = list(csv.DictReader(f))
    return out, metrics, rows


@pytest.mark.parametrize("np_", [2, 4])
def test_autotune_tries_settings_then_keeps_the_best(tmp_path, np_):
    out, metrics, rows = tune(tmp_path, np_)
    assert len(rows) == SETTINGS + 1  # each setting tried, then the best again
    assert list(rows[0]) == ["hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce", "cache_enabled",
                             "cycle_time_ms", "tensor_fusion_threshold", "score"]  # Horovod's columns
    assert {(r["hierarchical_allreduce"], r["hierarchical_allgather"], r["torus_allreduce"], r["cache_enabled"])
            for r in rows} == {("0", "0", "0", "1")}
    tried, best = rows[:-1], rows[-1]
    assert max(tried, key=lambda r: float(r["score"])) == best
    assert all(float(r["score"]) > 0 for r in tried)
    assert len({(r["cycle_time_ms"], r["tensor_fusion_threshold"]) for r in tried}) == SETTINGS
    assert metrics["autotuning"] is False and metrics["autotune_settings"] == SETTINGS
    assert metrics["fusion_threshold"] == pytest.approx(float(best["tensor_fusion_threshold"]) * 2**20, rel=1e-5)
    assert metrics["cycle_time_ms"] == pytest.approx(float(best["cycle_time_ms"]), abs=1e-3)
    assert "INFO: autotune: settled on fusion threshold " in out
    # Each change of settings is a mark in the timeline; the last one is the setting kept.
    marks = [e["args"]["tensor"] for e in json.loads((tmp_path / "tl.json").read_text())["traceEvents"]
             if e["name"] == "AUTOTUNE"]
    assert SETTINGS - 1 <= len(marks) <= SETTINGS
    assert marks[-1] == (f"autotune: fusion threshold {float(best['tensor_fusion_threshold']):.2f} MB, "
                         f"cycle time {float(best['cycle_time_ms']):.2f} ms")


def test_autotune_leaves_a_setting_the_user_chose(tmp_path):
    _, metrics, rows = tune(tmp_path, 2, HOROVOD_FUSION_THRESHOLD=str(8 << 20), HOROVOD_CACHE_CAPACITY="0")
    assert {r["tensor_fusion_threshold"] for r in rows} == {"8"}
    assert {r["cache_enabled"] for r in rows} == {"0"}
    assert len({r["cycle_time_ms"] for r in rows[:-1]}) == SETTINGS
    assert metrics["fusion_threshold"] == 8 << 20


def test_autotune_off_keeps_the_defaults(tmp_path):
    out = run_ranks(2, ["tests/ranks/autotune_steps.py", "20"]).stdout
    metrics = json.loads(next(line for line in out.splitlines() if line.startswith("METRICS "))[8:])
    assert metrics == {"fusion_threshold": 128 << 20, "cycle_time_ms": 1.0, "autotuning": False,
                       "autotune_settings": 0}
