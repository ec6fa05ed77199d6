"""The CUDA SpMV leaves' arithmetic, without a device (``targets/cuda/include/sdfgsparse_cuda_spmv.cuh``).

A C++ driver compiled with g++ runs the header's host/device code on the CPU: the plan of a
launch (which kernel, group width, threads, blocks), the merge-path search, every thread of a
merge-path launch in turn and then its carries, and the vector kernel's rows with the
device's order of shuffle additions. Their results must be scipy's over a zoo of matrices
(empty rows and matrices, one huge row, rectangular, float32 and float64, int32 and int64
indices). The kernels themselves compile with nvcc for sm_80 and sm_90 (no device needed;
skipped without nvcc). What they do on a device is measured by ``make gpu-check``.
"""
import shutil
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

from sdfgsparse.targets.cuda import toolchain
from sdfgsparse.targets.cuda.environment import INCLUDE

DRIVER = r'''
#include "sdfgsparse_cuda_spmv.cuh"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
using namespace sdfgsparse::cuda;

template <typename T, typename I> int run(const char* mode, FILE* in, FILE* out, long long rows, long long cols,
                                          long long nnz, int tpr) {
    std::vector<I> pos(rows + 1), crd(nnz);
    std::vector<T> vals(nnz), x(cols), y(rows, T(-12345));
    if (fread(pos.data(), sizeof(I), rows + 1, in) != (size_t)(rows + 1)) return 3;
    if (nnz && fread(crd.data(), sizeof(I), nnz, in) != (size_t)nnz) return 3;
    if (nnz && fread(vals.data(), sizeof(T), nnz, in) != (size_t)nnz) return 3;
    if (cols && fread(x.data(), sizeof(T), cols, in) != (size_t)cols) return 3;
    if (!strcmp(mode, "merge")) {
        const SpmvPlan p = spmv_plan(rows, nnz, 1LL << 40);  // (forced onto the merge path)
        if (p.kind != SPMV_MERGE) return 4;
        std::vector<int64_t> carry_row(p.carries > 0 ? p.carries : 1);
        std::vector<T> carry_value(p.carries > 0 ? p.carries : 1);
        for (long long t = 0; t < p.threads; ++t)
            spmv_merge_thread(t, p.items, rows, nnz, pos.data(), crd.data(), vals.data(), x.data(), y.data(),
                              carry_row.data(), carry_value.data());
        for (long long t = 0; t < p.threads; ++t)
            if (carry_row[t] < rows) y[carry_row[t]] += carry_value[t];
    } else {
        for (long long r = 0; r < rows; ++r) {
            const long long lo = pos[r], hi = pos[r + 1];
            switch (tpr) {
#define W(N) case N: y[r] = spmv_vector_row_host<N>(crd.data(), vals.data(), x.data(), lo, hi); break;
                W(1) W(2) W(4) W(8) W(16) W(32)
#undef W
                default: return 5;
            }
        }
    }
    fwrite(y.data(), sizeof(T), rows, out);
    return 0;
}

int main(int argc, char** argv) {
    if (!strcmp(argv[1], "plan")) {  // plan rows nnz longest
        const SpmvPlan p = spmv_plan(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]));
        printf("%d %d %d %lld %lld %lld %d\n", p.kind, p.tpr, p.items, p.threads, p.blocks, p.carries, p.error);
        return 0;
    }
    if (!strcmp(argv[1], "search")) {  // search file rows nnz: every diagonal's coordinate
        const long long rows = atoll(argv[3]), nnz = atoll(argv[4]);
        std::vector<long long> pos(rows + 1);
        FILE* in = fopen(argv[2], "rb");
        if (fread(pos.data(), sizeof(long long), rows + 1, in) != (size_t)(rows + 1)) return 3;
        fclose(in);
        for (long long d = 0; d <= rows + nnz; ++d) {
            const MergeCoord c = merge_path_search(d, pos.data() + 1, rows, nnz);
            printf("%lld %lld\n", c.row, c.entry);
        }
        printf("longest %lld\n", sampled_longest_row(pos.data(), rows));
        return 0;
    }
    // merge|vector in out rows cols nnz value_bytes index_bytes tpr
    FILE* in = fopen(argv[2], "rb");
    FILE* out = fopen(argv[3], "wb");
    const long long rows = atoll(argv[4]), cols = atoll(argv[5]), nnz = atoll(argv[6]);
    const int vb = atoi(argv[7]), ib = atoi(argv[8]), tpr = atoi(argv[9]);
    int rc;
    if (vb == 8 && ib == 4) rc = run<double, int32_t>(argv[1], in, out, rows, cols, nnz, tpr);
    else if (vb == 8) rc = run<double, int64_t>(argv[1], in, out, rows, cols, nnz, tpr);
    else if (ib == 4) rc = run<float, int32_t>(argv[1], in, out, rows, cols, nnz, tpr);
    else rc = run<float, int64_t>(argv[1], in, out, rows, cols, nnz, tpr);
    fclose(in);
    fclose(out);
    return rc;
}
'''

@pytest.fixture(scope='module')
def driver(tmp_path_factory):
    if shutil.which('g++') is None:
        pytest.skip('needs g++')
    d = tmp_path_factory.mktemp('cuda_spmv')
    src, exe = d / 'driver.cpp', d / 'driver'
    src.write_text(DRIVER)
    subprocess.run(['g++', '-O1', '-std=c++14', '-Wall', '-Werror', f'-I{INCLUDE}', str(src), '-o', str(exe)],
                   check=True, capture_output=True, timeout=120)
    return str(exe)


def _plan(driver, rows, nnz, longest):
    out = subprocess.run([driver, 'plan', str(rows), str(nnz), str(longest)], check=True, capture_output=True,
                         text=True, timeout=30).stdout.split()
    kind, tpr, items, threads, blocks, carries, error = (int(v) for v in out)
    return dict(kind='merge' if kind else 'vector', tpr=tpr, items=items, threads=threads, blocks=blocks,
                carries=carries, error=error)


def _zoo(rng):
    """name -> a CSR matrix of the shapes that break partitions."""
    rows = 300
    one_long = sp.lil_array((rows, 500))
    one_long[7, :] = rng.random(500)  # one row of 500 entries, the rest empty
    one_long[200, 3] = 1.0
    power = sp.random_array((rows, 400), density=0.01, format='csr', rng=rng)
    power = sp.vstack([power, sp.csr_array(rng.random((2, 400)))]).tocsr()  # two dense rows at the end
    band = sp.diags_array([rng.random(rows - abs(k)) for k in (-2, -1, 0, 1, 2)], offsets=[-2, -1, 0, 1, 2])
    empty_rows = sp.random_array((rows, 50), density=0.02, format='csr', rng=rng)  # most rows empty
    return {
        'band': sp.csr_array(band),
        'power_law_two_dense_rows': power,
        'one_long_row': sp.csr_array(one_long),
        'mostly_empty_rows': empty_rows,
        'rectangular_wide': sp.random_array((40, 3000), density=0.05, format='csr', rng=rng),
        'rectangular_tall': sp.random_array((3000, 7), density=0.3, format='csr', rng=rng),
        'no_entries': sp.csr_array((25, 30)),
        'one_row': sp.random_array((1, 700), density=0.5, format='csr', rng=rng),
        'one_entry': sp.csr_array(([2.5], ([0], [0])), shape=(1, 1)),
    }


def _run(driver, tmp_path, mode, A, x, tpr=1):
    A = sp.csr_array(A)
    A.sort_indices()
    vb, ib = A.data.dtype.itemsize, A.indices.dtype.itemsize
    src, dst = tmp_path / 'in.bin', tmp_path / 'out.bin'
    with open(src, 'wb') as f:
        for arr in (A.indptr, A.indices, A.data, x):
            arr.tofile(f)
    subprocess.run([driver, mode, str(src), str(dst), str(A.shape[0]), str(A.shape[1]), str(A.nnz), str(vb), str(ib),
                    str(tpr)], check=True, capture_output=True, timeout=60)
    return np.fromfile(dst, dtype=A.data.dtype)


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
@pytest.mark.parametrize('index', [np.int32, np.int64])
def test_merge_path_threads_and_carries_compute_scipys_product(driver, tmp_path, rng, dtype, index):
    for name, A in _zoo(rng).items():
        A = sp.csr_array(A, dtype=dtype)
        A.indptr, A.indices = A.indptr.astype(index), A.indices.astype(index)
        x = rng.standard_normal(A.shape[1]).astype(dtype)
        want = (A.astype(np.float64) @ x.astype(np.float64))
        got = _run(driver, tmp_path, 'merge', A, x)
        tol = 1e-12 if dtype == np.float64 else 2e-4
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)),
                                   err_msg=name)


@pytest.mark.parametrize('tpr', [1, 2, 4, 8, 16, 32])
def test_vector_rows_in_the_devices_order_compute_scipys_product(driver, tmp_path, rng, tpr):
    for name, A in _zoo(rng).items():
        x = rng.standard_normal(A.shape[1])
        got = _run(driver, tmp_path, 'vector', sp.csr_array(A, dtype=np.float64), x, tpr)
        np.testing.assert_allclose(got, A @ x, rtol=1e-12, atol=1e-12, err_msg=f'{name}, {tpr} threads per row')


def test_merge_path_search_cuts_the_walk_into_equal_pieces(driver, tmp_path, rng):
    """Each diagonal d maps to (row, entry) with row + entry == d, both never decreasing from
    one diagonal to the next (so pieces cover every item once), and row ends and entries
    interleave as in the walk: row r's end comes after its entries and before the next."""
    for name, A in _zoo(rng).items():
        pos = sp.csr_array(A).indptr.astype(np.int64)
        rows, nnz = len(pos) - 1, int(pos[-1])
        f = tmp_path / 'pos.bin'
        pos.tofile(f)
        out = subprocess.run([driver, 'search', str(f), str(rows), str(nnz)], check=True, capture_output=True,
                             text=True, timeout=60).stdout.splitlines()
        coords = np.array([[int(v) for v in line.split()] for line in out[:-1]])
        assert len(coords) == rows + nnz + 1, name
        assert (coords.sum(axis=1) == np.arange(rows + nnz + 1)).all(), name
        assert (np.diff(coords, axis=0) >= 0).all(), name  # one step: a row end or an entry
        assert tuple(coords[0]) == (0, 0) and tuple(coords[-1]) == (rows, nnz), name
        # at coordinate (r, e): the first r rows' ends are consumed, so all their entries are
        # (pos[r] <= e), and row r's end is not (e <= pos[r + 1])
        r, e = coords[:, 0], coords[:, 1]
        assert (pos[r] <= e).all() and (e[r < rows] <= pos[r[r < rows] + 1]).all(), name
        lengths = np.diff(pos)
        sample = [(rows - 1) * s // (min(rows, 64) - 1) if rows > 1 else 0 for s in range(min(rows, 64))]
        assert out[-1] == f'longest {lengths[sample].max(initial=0) if rows else 0}', name


def test_plans(driver):
    # regular rows: a group as wide as the mean row (rounded up to a power of two, at most a warp)
    assert _plan(driver, 1000, 5000, 5) == dict(kind='vector', tpr=8, items=8, threads=8000, blocks=32, carries=0,
                                                error=0)
    assert _plan(driver, 1000, 1000, 1)['tpr'] == 1
    assert _plan(driver, 1000, 30000, 40)['tpr'] == 32
    # one row far longer than the mean (and than a warp), or long rows on average: the merge path,
    # (rows + nnz) / 8 threads, a carry each
    p = _plan(driver, 100000, 500000, 20000)
    assert p == dict(kind='merge', tpr=1, items=8, threads=75000, blocks=293, carries=75000, error=0)
    assert _plan(driver, 100, 100 * 200, -1)['kind'] == 'merge'
    assert _plan(driver, 100, 100 * 100, -1)['kind'] == 'vector'
    # a long row that is not long beside the mean stays on the vector kernel
    assert _plan(driver, 1000, 20000, 40)['kind'] == 'vector'
    # nothing to launch
    assert _plan(driver, 0, 0, 0)['blocks'] == 0
    assert _plan(driver, 10, 0, 0) == dict(kind='vector', tpr=1, items=8, threads=10, blocks=1, carries=0, error=0)
    # a grid beyond gridDim.x's limit is an error, not a wrapped launch
    assert _plan(driver, 2**40, 2**40, 1)['error'] == 1
    assert _plan(driver, 2**30, 2**30, 1)['error'] == 0


@pytest.mark.skipif(toolchain.nvcc_path() is None, reason='no nvcc on this machine')
@pytest.mark.parametrize('arch', ['sm_80', 'sm_90'])
def test_kernels_compile_with_nvcc(tmp_path, arch):
    src = tmp_path / 'spmv.cu'
    calls = ''.join(
        f'  if (spmv_launch<{t}, {i}>(p, 1, 1, ({i}*)0, ({i}*)0, ({t}*)0, ({t}*)0, ({t}*)0, (int64_t*)0, ({t}*)0, s)'
        ' != cudaSuccess) return 1;\n' for t in ('float', 'double') for i in ('int32_t', 'int64_t'))
    # the leaves the GPU SDFGs call from their kernels (targets/cuda/spmv.py, spmm.py, sddmm.py), device code too
    leaf_kernels = ''.join(
        f'__global__ void leaves_{t}_{i}(const {i}* p, const {i}* c, const {t}* v, const {t}* x, {t}* y, '
        f'int64_t* cr, {t}* cv) {{\n'
        f'  const long long t = blockIdx.x * blockDim.x + threadIdx.x;\n'
        f'  spmv_merge_thread<{t}>(t, 8, 10, p[10], p, c, v, ss_cuda_in(x), y, cr, cv);\n'
        f'  spmv_merge_fixup_thread<{t}>(t, 10, cr, cv, y);\n'
        f'  spmm_row_col<{t}>(t / 4, t % 4, p, c, v, x, 4, y, 4);\n'
        f'  sddmm_row_lane<{t}>(t / 32, t % 32, p, c, v, x, 4, x, 1, 4, 4, y);\n}}\n'
        for t in ('float', 'double') for i in ('int32_t', 'int64_t'))
    src.write_text('#include "sdfgsparse_cuda_spmv.cuh"\n#include "sdfgsparse_cuda_spmm.cuh"\n'
                   '#include "sdfgsparse_cuda_sddmm.cuh"\n'
                   'using namespace sdfgsparse::cuda;\n'
                   'int launch_all(const SpmvPlan& p, cudaStream_t s) {\n' + calls + '  return 0;\n}\n' + leaf_kernels)
    out = subprocess.run([toolchain.nvcc_path(), '-c', f'-arch={arch}', '-std=c++17', '-Werror', 'all-warnings',
                          f'-I{INCLUDE}', str(src), '-o', str(tmp_path / 'spmv.o')], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    if shutil.which('nm'):  # every kernel instantiated: 4 type pairs x (6 group widths + merge), 2 fix-ups
        symbols = subprocess.run(['nm', '-C', str(tmp_path / 'spmv.o')], capture_output=True, text=True).stdout
        stubs = {line.split('__device_stub__')[1].split('(')[0] for line in symbols.splitlines()
                 if '__device_stub__' in line}
        assert len([k for k in stubs if 'spmv_vector_kernel' in k]) == 24, stubs
        assert len([k for k in stubs if 'spmv_merge_kernel' in k]) == 4, stubs
        assert len([k for k in stubs if 'spmv_merge_fixup' in k]) == 2, stubs
        assert len([k for k in stubs if 'leaves_' in k]) == 4, stubs
