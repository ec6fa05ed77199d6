"""Which GPU products take the CUDA leaves (``targets/cuda/spmv.py``, ``targets/cuda/spmm.py``) and
which the generic level walk, and that each computes scipy's result: the GPU SDFG run with CPU
schedules (:func:`sdfgsparse.targets.cuda.lower.with_cpu_schedules`) over float32 and float64,
int32 and int64 indices, a CSC matrix's transpose (a row walk), and the cases the leaves do not
take (mixed dtypes, a strided vector, a fused epilogue, COO). No device needed."""
import copy
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.targets.cuda import lower
from sparse_zoo import zoo

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
SPMV = {'sdfgsparse::cuda::spmv_merge_thread', 'sdfgsparse::cuda::spmv_merge_fixup_thread'}
SPMM = {'sdfgsparse::cuda::spmm_row_col'}
SDDMM = {'sdfgsparse::cuda::sddmm_row_lane'}


@dace.program
def leaves_f32_i64(A: ss.CSR[dace.float32, M, N, dace.int64], x: dace.float32[N], B: dace.float32[N, K]):
    return A @ x, A @ B


@dace.program
def leaves_csc_t(A: ss.CSC[dace.float64, M, N], x: dace.float64[M], B: dace.float64[M, K]):
    return A.T @ x, A.T @ B


@dace.program
def leaves_sddmm_f32_i64(S: ss.CSR[dace.float32, M, N, dace.int64], X: dace.float32[M, K],
                         Y: dace.float32[K, N]):
    return ss.sddmm(S, X, Y)


@dace.program
def leaves_sddmm_keys(S: ss.CSR[dace.float64, M, N], X: dace.float64[M, K], Y: dace.float64[N, K]):
    return S * (X @ Y.T)  # SparseLoopOrdering: an SDDMM reading Y's rows (y_layout NK)


@dace.program
def leaves_sddmm_csc_t(S: ss.CSC[dace.float64, N, M], X: dace.float64[M, K], Y: dace.float64[K, N]):
    return S.T * (X @ Y)  # SparseLoopOrdering: an SDDMM of S's transposed view


@dace.program
def leaves_sddmm_mixed(S: ss.CSR[dace.float64, M, N], X: dace.float32[M, K], Y: dace.float64[K, N]):
    return ss.sddmm(S, X, Y)


@dace.program
def leaves_mixed(A: ss.CSR[dace.float32, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def leaves_strided(A: ss.CSR[dace.float64, M, N], X: dace.float64[N, K]):
    return A @ X[:, 1]


@dace.program
def leaves_epilogue(A: ss.CSR[dace.float64, M, N], x: dace.float64[N], b: dace.float64[M]):
    return 2.0 * (A @ x) + b


@dace.program
def leaves_coo(A: ss.COO[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


def _leaves(sdfg):
    return {n.code.as_string.strip().split('<')[0] for n, _ in sdfg.all_nodes_recursive()
            if isinstance(n, dace.nodes.Tasklet) and n.language != dace.Language.Python}


def _on_cpu(prog):
    from sdfgsparse.transformations import SparseEpilogueFusion, SparseLoopOrdering
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        sdfg = copy.deepcopy(prog.to_sdfg())
        if prog is leaves_epilogue:  # 2 * (A @ x) + b fused into the SpMV node
            assert sdfg.apply_transformations_repeated(SparseEpilogueFusion) >= 1
        if prog in (leaves_sddmm_keys, leaves_sddmm_csc_t):
            assert sdfg.apply_transformations_repeated(SparseLoopOrdering) == 1
        sdfg = lower.to_gpu(sdfg)
    return _leaves(sdfg), ss.compile(lower.with_cpu_schedules(sdfg))


def _matrices(dtype, index):
    out = {}
    for name, A in zoo(np.float64).items():
        A = sp.csr_array(A, dtype=dtype)
        A.indptr, A.indices = A.indptr.astype(index), A.indices.astype(index)
        out[name] = A
    return out


def test_float32_and_int64_indices_take_both_leaves(rng):
    leaves, cpu = _on_cpu(leaves_f32_i64)
    assert leaves == SPMV | SPMM
    for name, A in _matrices(np.float32, np.int64).items():
        x = rng.standard_normal(A.shape[1]).astype(np.float32)
        B = rng.standard_normal((A.shape[1], 5)).astype(np.float32)
        y, Y = cpu(A=A, x=x, B=B)
        Ad = A.toarray().astype(np.float64)
        scale = 1 + np.abs(Ad).sum(axis=1).max(initial=0)
        np.testing.assert_allclose(y, Ad @ x, rtol=1e-5, atol=1e-5 * scale, err_msg=name)
        np.testing.assert_allclose(Y, Ad @ B, rtol=1e-5, atol=1e-5 * scale, err_msg=name)


def test_a_csc_matrix_transposed_is_a_row_walk(rng):
    leaves, cpu = _on_cpu(leaves_csc_t)
    assert leaves == SPMV | SPMM
    for name, A in _matrices(np.float64, np.int32).items():
        C = sp.csc_array(A)
        x, B = rng.standard_normal(A.shape[0]), rng.standard_normal((A.shape[0], 33))
        y, Y = cpu(A=C, x=x, B=B)
        np.testing.assert_allclose(y, C.T @ x, rtol=1e-12, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(Y, C.T @ B, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize('prog', [leaves_mixed, leaves_strided, leaves_epilogue, leaves_coo],
                         ids=['mixed-dtypes', 'strided-x', 'fused-epilogue', 'coo'])
def test_what_the_leaves_do_not_take_runs_the_level_walk(prog, rng):
    leaves, cpu = _on_cpu(prog)
    assert leaves == set()
    A = sp.random_array((60, 40), density=0.1, format='csr', rng=rng)
    x = rng.standard_normal(40)
    if prog is leaves_mixed:
        A32 = sp.csr_array(A, dtype=np.float32)
        np.testing.assert_allclose(cpu(A=A32, x=x), A32.astype(np.float64) @ x, rtol=1e-6)
    elif prog is leaves_strided:
        X = rng.standard_normal((40, 3))
        np.testing.assert_allclose(cpu(A=A, X=X), A @ X[:, 1], rtol=1e-12)
    elif prog is leaves_epilogue:
        b = rng.standard_normal(60)
        np.testing.assert_allclose(cpu(A=A, x=x, b=b), 2.0 * (A @ x) + b, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(cpu(A=sp.coo_array(A), x=x), A @ x, rtol=1e-12)


def _sddmm_reference(S, X, Y):
    """S * (X @ Y) on S's pattern, computed in float64."""
    D = X.astype(np.float64) @ Y.astype(np.float64)
    C = sp.coo_array(S)
    return C.row, C.col, C.data.astype(np.float64) * D[C.row, C.col]


def _check_sddmm(got, S, X, Y, name, rtol):
    got = sp.coo_array(got)
    rows, cols, want = _sddmm_reference(S, X, Y)
    assert got.shape == S.shape, name
    dense = np.zeros(S.shape)
    dense[rows, cols] = want
    scale = 1 + np.abs(X).sum(axis=1).max(initial=0) * np.abs(Y).max(initial=0)
    np.testing.assert_allclose(got.toarray(), dense, rtol=rtol, atol=rtol * scale, err_msg=name)


@pytest.mark.parametrize('k', [1, 5, 32, 33, 70])
def test_sddmm_leaf_float32_int64(k, rng):
    """The warp-per-row SDDMM over the zoo, K below, at and above the warp (lanes with no
    work, a second pass), float32 values and int64 indices."""
    leaves, cpu = _on_cpu(leaves_sddmm_f32_i64)
    assert leaves == SDDMM
    for name, S in _matrices(np.float32, np.int64).items():
        X = rng.standard_normal((S.shape[0], k)).astype(np.float32)
        Y = rng.standard_normal((k, S.shape[1])).astype(np.float32)
        _check_sddmm(cpu(S=S, X=X, Y=Y), S, X, Y, name, 1e-5)


@pytest.mark.parametrize('prog', [leaves_sddmm_keys, leaves_sddmm_csc_t], ids=['y-rows-NK', 'csc-transposed'])
def test_sddmm_leaf_reads_y_by_rows_and_transposed_patterns(prog, rng):
    leaves, cpu = _on_cpu(prog)
    assert leaves == SDDMM
    for name, A in _matrices(np.float64, np.int32).items():
        k = 37
        if prog is leaves_sddmm_keys:
            X, Yt = rng.standard_normal((A.shape[0], k)), rng.standard_normal((A.shape[1], k))
            _check_sddmm(cpu(S=A, X=X, Y=Yt), A, X, Yt.T, name, 1e-12)
        else:
            C = sp.csc_array(A.T)  # N x M, its transpose is A
            X, Y = rng.standard_normal((A.shape[0], k)), rng.standard_normal((k, A.shape[1]))
            _check_sddmm(cpu(S=C, X=X, Y=Y), A, X, Y, name, 1e-12)


def test_sddmm_with_mixed_dtypes_runs_the_level_walk(rng):
    leaves, cpu = _on_cpu(leaves_sddmm_mixed)
    assert leaves == set()
    S = sp.random_array((50, 40), density=0.1, format='csr', rng=rng)
    X, Y = rng.standard_normal((50, 6)).astype(np.float32), rng.standard_normal((6, 40))
    _check_sddmm(cpu(S=S, X=X, Y=Y), S, X, Y, 'mixed', 1e-6)


@dace.program
def leaves_dense_operands(A: ss.CSR[dace.float64, M, N], B: dace.float64[N, K], X: dace.float64[M, K],
                          Y: dace.float64[K, N]):
    return A @ B, ss.sddmm(A, X, Y)


def test_the_lanes_of_a_warp_share_a_row_in_the_generated_cuda():
    """SpMM's columns and SDDMM's lanes are on threadIdx.x in blocks of 32 x 8, so a warp holds
    one row (SDDMM's shuffles need every lane of the warp on the same row)."""
    import re
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        sdfg = lower.to_gpu(copy.deepcopy(leaves_dense_operands.to_sdfg()))
        (cu, ) = [o.clean_code for o in sdfg.generate_code() if o.language == 'cu']
    for label, lane, row in (('spmm_rc', 'c', 'r'), ('sddmm_rl', 'l', 'r')):
        kernel = cu[cu.index(f'__global__ void __launch_bounds__(256) {label}'):]
        kernel = kernel[:kernel.index('\n}\n')]
        assert re.search(rf'int {lane} = \(blockIdx\.x \* 32 \+ threadIdx\.x\);', kernel), label
        assert re.search(rf'int {row} = \(blockIdx\.y \* 8 \+ threadIdx\.y\);', kernel), label
        launch = re.search(rf'cudaLaunchKernel\(\(void\*\){label}\w*, dim3\([^;]*\), dim3\(([^)]*)\)', cu)
        assert launch and launch.group(1) == '32, 8, 1', label
