"""The kernels' OpenMP paths with several threads.

The suite runs its two workers with one OpenMP thread each (two cores), so no other test
can see a race between OpenMP threads. This one runs every op of the zoo programs
(``test_ops_zoo``: 14 ops with dense operands in float64 / int32, ``test_sparse_sparse_zoo``:
sparse results, SpGEMM, conversions, in the dtypes that test builds for the format) in a
process with ``OMP_NUM_THREADS=4`` on matrices large enough to split across threads, with
long rows and empty rows, three times each, against scipy. Collected after the zoo tests
(``after_zoo``), it loads their builds.
"""
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = textwrap.dedent('''
    import sys
    import dace, numpy as np, scipy.sparse as sp
    sys.path[:0] = [{tests!r}, {ops!r}]
    import sparse_zoo, test_ops_zoo, test_sparse_sparse_zoo

    def matrix(seed, m=420, n=300):
        rng = np.random.default_rng(seed)
        A = sp.random_array((m, n), density=0.03, format='lil', rng=rng,
                            data_sampler=lambda size: rng.standard_normal(size))
        A[7, :] = rng.standard_normal(n)       # a long row
        A[:, 11] = rng.standard_normal((m, 1))  # a long column
        A[40:60, :] = 0                         # empty rows
        return sp.csr_array(A)

    # the dtypes test_sparse_sparse_zoo builds for each format (one pair, alternating):
    # this process loads those builds (it is collected after them) instead of building more
    pairs = {{p.values[0]: p.values[1:] for p in sparse_zoo.signatures(one_pair=True)}}
    for fmt in {formats!r}:
        vt, it = pairs[fmt]
        for rep in range(3):
            A, B = matrix(rep), matrix(rep + 10)
            test_ops_zoo.run_case(fmt, dace.float64, dace.int32, A, seed=rep)
            test_sparse_sparse_zoo.run_case(fmt, vt, it, A.astype(vt.type), B.astype(vt.type), seed=rep)
        print(fmt, 'ok', flush=True)
''')


@pytest.mark.after_zoo  # the programs of test_ops_zoo and test_sparse_sparse_zoo
@pytest.mark.parametrize('formats', [['CSR', 'CSC', 'COO'], ['DCSR', 'BSR', 'ELL']])
def test_zoo_ops_with_four_openmp_threads(formats):
    tests = os.path.dirname(HERE)
    script = SCRIPT.format(tests=tests, ops=HERE, formats=formats)
    env = dict(os.environ, OMP_NUM_THREADS='4')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, env=env, timeout=1200,
                         cwd=os.getcwd())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert out.stdout.split() == [w for f in formats for w in (f, 'ok')]
