"""Shared fixtures. Helpers live in ``sparse_zoo.py`` (on the path through pytest's
``pythonpath`` setting)."""
import os

os.environ.setdefault('DACE_cache', 'hash')
os.environ.setdefault('OMP_NUM_THREADS', '1')  # two pytest workers share the two cores
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')  # as the benchmark runs NumPy's BLAS (bench/cli.py)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import sdfgsparse  # noqa: E402,F401  (applies the DaCe patches before any test module parses a program)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``after_zoo`` run the zoo's programs in a process of their own; collected
    last, they load what the zoo tests built (a cold build of those programs is about 150 s
    of the suite's two workers) instead of building it first."""
    items.sort(key=lambda item: item.get_closest_marker('after_zoo') is not None)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
