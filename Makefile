# The two commands of the README:
#   make demo   creates .venv (pinned packages) and runs the main job on bundled data
#   make test   creates .venv (pinned packages) and runs the test suite
#   make fuzz   (optional) fuzzes the argument checks and the SDFG-file check, FUZZ_SECONDS seconds each
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export DACE_cache ?= hash
export OMP_NUM_THREADS ?= 2
# the test suite runs two workers on two cores: one OpenMP thread each
test: export OMP_NUM_THREADS = 1
# ss.optimize's measured choice of implementations (a few builds per call) only where a test asks
test: export SDFGSPARSE_MEASURE_IMPLEMENTATIONS = 0

FUZZ_SECONDS ?= 300

.PHONY: venv demo test fuzz clean gpu-check

$(STAMP): setup.cfg setup.py pyproject.toml constraints.txt sdfgsparse/runtime/_binder.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt -e '.[test,torch,vscode,mkl,mpi]'
	$(PY) -m sdfgsparse.targets.fpga.toolchain --fetch-ap-types
	touch $(STAMP)

venv: $(STAMP)

# the quick bench reports pairs slower than scipy in its table and closing line; its exit
# status fails the demo only where a result is wrong (bench --check is the speed gate)
demo: $(STAMP)
	$(PY) -m sdfgsparse demo
	$(PY) -m sdfgsparse bench --quick

# the differential suite again with every sparse node expanded as its portable 'pure' SDFG
PURE_SUITE = tests/ops/test_ops_zoo.py tests/ops/test_sparse_sparse_zoo.py tests/ops/test_softmax.py \
             tests/ops/test_elementwise_result_format.py tests/ops/test_one_element_operands.py

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=15 tests
	SDFGSPARSE_IMPLEMENTATION=pure $(PY) -m pytest -q -n 2 --dist loadgroup -p no:warnings $(PURE_SUITE)

# the checks to run first on a machine with a GPU (the tests skip without one): the GPU tests
# and bench --target gpu --quick (.ci/gpu-check: also how to run it where pip cannot install)
gpu-check: $(STAMP)
	PYTHON=$(PY) bash .ci/gpu-check

# coverage-guided fuzzing of the argument checks and of the SDFG-file check (atheris); not part
# of `make test` (which runs a few hundred SDFG mutants: tests/scripting/test_sdfg_fuzz.py)
fuzz: $(STAMP)
	$(PY) -m pip install -q -c constraints.txt atheris
	cd tests/fuzz && ../../$(PY) fuzz_sdfg.py --mutants 5000
	cd tests/fuzz && ../../$(PY) fuzz_sdfg.py -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096
	cd tests/fuzz && ../../$(PY) fuzz_arguments.py -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096

clean:
	rm -rf $(VENV) .dacecache tests/.dacecache _dacegraphs
