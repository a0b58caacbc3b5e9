# make demo: set everything up from a fresh machine and train on 2 MPI ranks (MXNet, digits).
# make test: set everything up and run all tests (C++ engine tests, then pytest).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed
export OMP_NUM_THREADS ?= 1
export MXNET_CPU_WORKER_NTHREADS ?= 1

.PHONY: setup demo test test-cpp test-py bench clean

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

# The editable install rebuilds the extension incrementally when C++ sources change.
setup: $(STAMP)
	$(PY) -m pip install -q --no-build-isolation -e .

demo: setup
	$(VENV)/bin/hvdrun -np 2 $(PY) examples/mxnet_mnist.py

test-cpp: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S engine -B build/engine -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE=$(CURDIR)/$(PY) > /dev/null
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build build/engine -j2
	build/engine/engine_tests

test-py: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m pytest -q -p no:cacheprovider

test: test-cpp test-py

bench: setup
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) benchmarks/allreduce_bench.py

clean:
	rm -rf build $(VENV)
