"""The engine defines each cross-tier contract once (op, reduce op, dtype, status and phase codes, and its
settings); the Python API, hvdrun and the README follow it. No MPI ranks: only the extension is loaded."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import jupyter_hvd as hvd
from jupyter_hvd import _C, dtypes, errors
from jupyter_hvd.monitor import Monitor, batch
from jupyter_hvd.runner import hvdrun, launch

README = Path(__file__).resolve().parents[1] / "README.md"
SETTINGS = {s["name"]: s for s in _C.settings()}


def test_reduce_ops_are_plain_ints_valued_as_horovods_and_the_engine_codes() -> None:
    for r in _C.ReduceOp:
        assert type(getattr(hvd, r.name)) is int and getattr(hvd, r.name) == int(r)
    # horovod/common/message.h: a code kept from Horovod (op=1 in a config) is the same op here
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(np.ones(2), op=2)
    for call in (lambda: _C.OpSpec(0, reduce=hvd.Adasum),
                 lambda: _C.check_reduce([0], hvd.Adasum, 1.0, 1.0, "x", False)):
        with pytest.raises(ValueError, match=r"reduce op 2 \(Adasum\) is not one the engine has"):
            call()
    with pytest.raises(ValueError, match="unknown reduce op 99; use hvd.Average, hvd.Sum, hvd.Min"):
        hvd.allreduce(np.ones(2), op=99)


def test_dtype_codes_follow_the_engine_list() -> None:
    for t in _C.DataType:
        numpy_type = getattr(dtypes.ml_dtypes, t.name) if t.name == "bfloat16" else t.name
        assert dtypes.dtype_code(np.dtype(numpy_type), "x") == int(t)
    with pytest.raises(TypeError, match="allreduce: unsupported dtype uint32; supported: bfloat16, bool, float16, "):
        dtypes.dtype_code(np.dtype(np.uint32), "allreduce")
    swapped = ">f8" if np.little_endian else "<f8"  # a file's byte order (np.fromfile, FITS): never read as ours
    with pytest.raises(TypeError, match=re.escape(f"allreduce: unsupported dtype {swapped} (only in this machine's "
                                                  "byte order: convert with .astype('float64'))")):
        dtypes.dtype_code(np.ones(2, dtype=swapped).dtype, "allreduce")


def test_reductions_each_dtype_can_do() -> None:
    """Every dtype against every reduce op, with and without scaling, on the host and the GPU: only Average
    of bool, scaling bool, any reduction of a 16-bit integer GPU tensor (NCCL has none) and scaling a GPU
    tensor that is not floating-point are refused, naming the call."""
    floats = {int(_C.DataType[n]) for n in ("float16", "bfloat16", "float32", "float64")}
    ints16 = {int(_C.DataType[n]) for n in ("int16", "uint16")}
    for t in _C.DataType:
        for r in (r for r in _C.ReduceOp if r != _C.ReduceOp.Adasum):
            for scale in ((1.0, 1.0), (0.5, 1.0), (1.0, 2.0)):
                for on_device in (False, True):
                    scaled = scale != (1.0, 1.0)
                    refused = (t == _C.DataType.bool and (r == _C.ReduceOp.Average or scaled)
                               or on_device and (int(t) in ints16 or scaled and int(t) not in floats))
                    args = ([int(_C.DataType.float32), int(t)], int(r), *scale, "grouped_allreduce", on_device)
                    if not refused:
                        _C.check_reduce(*args)
                        continue
                    with pytest.raises(TypeError, match="^grouped_allreduce: (Average is not defined for bool|"
                                                        "prescale_factor/postscale_factor|int16 and uint16)"):
                        _C.check_reduce(*args)
    with pytest.raises(ValueError, match="reduce op 99 is not one the engine knows"):
        _C.check_reduce([0], 99, 1.0, 1.0, "allreduce", False)


def test_every_status_code_raises_its_exception() -> None:
    raised = {}
    for code in _C.StatusCode:
        try:
            errors.raise_for_status((int(code), f"why {code.name}", 3))
        except Exception as e:  # noqa: BLE001 - the class is what is checked
            raised[code.name] = e
    assert "Ok" not in raised
    assert {name: type(e) for name, e in raised.items()} == {
        "Mismatch": hvd.TensorMismatchError, "Invalid": ValueError, "Aborted": hvd.EngineAbortedError,
        "Shutdown": hvd.EngineShutdownError, "Internal": hvd.HorovodInternalError, "Refused": hvd.PeerArgumentError}
    assert raised["Aborted"].origin_rank == 3 and str(raised["Invalid"]) == "why Invalid"
    with pytest.raises(hvd.HorovodInternalError, match="later"):
        errors.raise_for_status((len(_C.StatusCode), "later", -1))


def test_timeline_phases_are_the_engines_in_code_order() -> None:
    assert batch.PHASES[0] == "NEGOTIATE" and batch.PHASES == tuple(p.name for p in _C.Phase)
    assert [int(_C.Phase[name]) for name in batch.PHASES] == list(range(len(batch.PHASES)))
    assert batch.HEALTH == {"STALL", "ABORT"}
    timeline = Monitor(1).state()["timeline"]  # the widget draws from these lists, not its own
    assert timeline["phases"] == list(batch.PHASES) and timeline["health_phases"] == ["ABORT", "STALL"]


def test_op_spec_takes_codes_and_refuses_unknown_ones() -> None:
    spec = _C.OpSpec(hvd.ops.BROADCAST, process_set=2, root_rank=1)
    assert (spec.op, spec.reduce, spec.process_set, spec.root_rank) == (_C.OpType.broadcast, _C.ReduceOp.Sum, 2, 1)
    assert repr(_C.OpSpec(hvd.ops.ALLREDUCE, reduce=hvd.Average, prescale=0.5)).startswith(
        "OpSpec(allreduce, reduce=Average, process_set=0, root_rank=-1, prescale=0.5")
    with pytest.raises(ValueError, match=f"op {len(_C.OpType)} is not one the engine knows"):
        _C.OpSpec(len(_C.OpType))
    with pytest.raises(ValueError, match="reduce op -1 is not one the engine knows"):
        _C.OpSpec(hvd.ops.ALLREDUCE, reduce=-1)
    with pytest.raises(TypeError):  # everything but the op by keyword
        _C.OpSpec(hvd.ops.ALLREDUCE, hvd.Sum)


def readme_defaults() -> dict[str, str]:
    """Each variable of the README's environment-variable table, with the default it shows."""
    section = README.read_text().split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    return {m[1]: m[2].strip() for m in re.finditer(r"^\| `(\w+)` \| ([^|]*) \|", section, re.M)}


def test_the_readme_lists_every_engine_setting_with_its_default() -> None:
    """And the one Horovod variable the launchers read rather than the engine, the start timeout."""
    readme = readme_defaults()
    engine = {name: s["default"] or "unset" for name, s in SETTINGS.items()}
    assert {name: readme.get(name) for name in engine} == engine
    assert readme[launch.START_TIMEOUT_VAR] == f"{launch.START_TIMEOUT_S:g}"
    assert [n for n in readme if n.startswith("HOROVOD_") and n not in {*SETTINGS, launch.START_TIMEOUT_VAR}] == []


def test_settings_are_checked_as_the_engine_reads_them() -> None:
    _C.check_setting("HOROVOD_CYCLE_TIME", "2.5")
    with pytest.raises(ValueError, match=r"^HOROVOD_CACHE_CAPACITY='-1': expected an integer >= 0$"):
        _C.check_setting("HOROVOD_CACHE_CAPACITY", "-1")
    with pytest.raises(ValueError, match="expected an integer from 0 to 2147483647"):
        _C.check_setting("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "2147483648")
    with pytest.raises(ValueError, match="expected one of trace, debug, info, warning, error, fatal"):
        _C.check_setting("HOROVOD_LOG_LEVEL", "loud")
    with pytest.raises(KeyError, match="HOROVOD_NO_SUCH"):
        _C.check_setting("HOROVOD_NO_SUCH", "1")
    assert SETTINGS["HOROVOD_LOG_LEVEL"]["kind"] == "choice" and SETTINGS["HOROVOD_LOG_LEVEL"]["default"] == "warning"


def test_hvdrun_flags_take_help_and_checks_from_the_settings() -> None:
    text = " ".join(hvdrun.build_parser().format_help().split())
    assert "(HOROVOD_AUTOTUNE_WARMUP_SAMPLES; default 3)" in text
    assert hvdrun.LOG_LEVELS == tuple(c.upper() for c in SETTINGS["HOROVOD_LOG_LEVEL"]["choices"])
    for flag, (name, _) in hvdrun.FLAG_ENV.items():
        assert name in SETTINGS, flag
    args = hvdrun.build_parser().parse_args(["-np", "2", "--autotune-steps-per-sample", "0", "prog"])
    with pytest.raises(ValueError, match="HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE='0': expected an integer from 1 to"):
        hvdrun.launch_spec(args, {})
