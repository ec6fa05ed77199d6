"""Shared fixtures. Helpers live in ``sparse_zoo.py`` (on the path through pytest's
``pythonpath`` setting)."""
import os

os.environ.setdefault('DACE_cache', 'hash')
os.environ.setdefault('OMP_NUM_THREADS', '1')  # two pytest workers share the two cores
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')  # as the benchmark runs NumPy's BLAS (bench/cli.py)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import dace  # noqa: E402

import sdfgsparse  # noqa: E402,F401  (applies the DaCe patches before any test module parses a program)
from sdfgsparse.build import policy  # noqa: E402

# The tests' own plain dense DaCe programs are built without -ffast-math, as a user who wants
# IEEE subnormals in the process sets it: DaCe's default flags (left as they are by sdfgsparse)
# link crtfastmath.o, whose constructor sets flush-to-zero for the whole process, and the
# tests of what our programs leave to the caller (subnormals, NaN) share the workers' processes.
# tests/runtime/test_dense_programs_unchanged.py runs DaCe's defaults in processes of its own.
if 'DACE_compiler_cpu_args' not in os.environ:
    dace.Config.set('compiler', 'cpu', 'args', value=policy.without_fast_math(dace.Config.get('compiler', 'cpu', 'args')))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``after_zoo`` run the zoo's programs in a process of their own; collected
    last, they load what the zoo tests built (a cold build of those programs is about 150 s
    of the suite's two workers) instead of building it first."""
    items.sort(key=lambda item: item.get_closest_marker('after_zoo') is not None)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
