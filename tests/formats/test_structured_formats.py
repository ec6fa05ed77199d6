"""The structured layouts (``ss.NM``, ``ss.GNM``, ``ss.VNM``): exact storage arrays of
hand-made examples, strict and by-magnitude host conversions against an independent NumPy
reference, the pattern parameters, and ``A @ x`` programs (one per format, reused by every
case) fed valid, tampered and misshapen arguments, from one thread and from eight."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.formats import get_format, sparse_type_of
from sparse_zoo import from_threads

M, N = dace.symbol('M'), dace.symbol('N')

NM24, GNM224, VNM228 = ss.NM[2, 4], ss.GNM[2, 2, 4], ss.VNM[2, 2, 8]
FORMATS = {'NM2_4': NM24, 'GNM2_2_4': GNM224, 'VNM2_2_8': VNM228}

# Hand-made examples (row 1 of NM, row 2 of GNM and VNM are empty), and their storage by hand.
EXAMPLES = {
    'NM2_4': (np.array([[1., 0, 2, 0, 0, 0, 0, 0],
                        [0, 0, 0, 0, 0, 0, 0, 0],
                        [0, 0, 0, 3, 4, 0, 5, 0],
                        [0, 6, 0, 0, 8, 0, 0, 0]]),
              # [row, group, slot]; a group with fewer than 2 entries pads the lowest unused offsets
              {'crd3': [0, 2, 0, 1, 0, 1, 0, 1, 0, 3, 0, 2, 0, 1, 0, 1],
               'vals': [1, 2, 0, 0, 0, 0, 0, 0, 0, 3, 4, 5, 0, 6, 8, 0]}),
    'GNM2_2_4': (np.array([[1., 0, 2, 0, 0, 0, 0, 0],
                           [0, 0, 3, 0, 0, 0, 0, 0],
                           [0, 0, 0, 0, 0, 0, 0, 0],
                           [0, 0, 0, 4, 0, 5, 0, 6]]),
                 # crd3 [rowblock, group, slot]; vals [rowblock, group, slot, row in block]
                 {'crd3': [0, 2, 0, 1, 0, 3, 1, 3],
                  'vals': [1, 0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 5, 0, 6]}),
    'VNM2_2_8': (np.array([[1., 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                           [0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0, 0, 9, 0],
                           [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                           [0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]),
                 # sel4 [rowblock, group, 4]: the block's columns, lowest unused ones to fill;
                 # crd4 (into the table) and vals [row, group, slot]
                 {'sel4': [0, 3, 5, 7, 0, 1, 2, 6, 0, 1, 2, 3, 0, 1, 2, 3],
                  'crd4': [0, 1, 0, 1, 2, 3, 0, 3, 0, 1, 0, 1, 0, 1, 0, 1],
                  'vals': [1, 2, 0, 0, 3, 4, 0, 9, 0, 0, 0, 0, 0, 5, 0, 0]}),
}


@pytest.mark.parametrize('name', sorted(EXAMPLES))
def test_exact_storage_arrays(name):
    A, want = EXAMPLES[name]
    S = ss.convert(A, FORMATS[name])
    assert isinstance(S, ss.SparseMatrix) and S.format is FORMATS[name] and S.shape == A.shape
    assert set(S.arrays) == set(want)
    for member, w in want.items():
        np.testing.assert_array_equal(S.arrays[member], w, err_msg=f'{name}.{member}')
        assert S.arrays[member].dtype == (np.float64 if member == 'vals' else np.int32)
    np.testing.assert_array_equal(S.toarray(), A)
    np.testing.assert_array_equal(S.to_scipy().toarray(), A)
    assert S.nnz == len(want['vals'])  # every slot is stored, padding zeros included


def sparse_dense(rng, shape, density=0.5, empty_rows=(1, )):
    """A seeded random dense matrix with about ``density`` non-zeros and empty rows."""
    W = rng.standard_normal(shape) * (rng.random(shape) < density)
    W[[r for r in empty_rows if r < shape[0]]] = 0
    return W


def pruned_reference(W, name):
    """``W`` pruned to the pattern of format ``name``, written independently of the library:
    the largest magnitudes (NaN largest), ties to the lower column."""
    fmt = FORMATS[name]
    pat = fmt.pattern
    n, m, g = pat.n, pat.m, pat.rows
    mag = np.where(np.isnan(W), np.inf, np.abs(W))
    out = np.zeros_like(W)

    def best(score, cols, k):
        return sorted(cols, key=lambda j: (-score[j], j))[:k]

    for r0 in range(0, W.shape[0], g):
        for c0 in range(0, W.shape[1], m):
            block = mag[r0:r0 + g, c0:c0 + m]
            shared = best(block.sum(axis=0), range(m), n if pat.kind == 'gnm' else 4)
            for i in range(g):
                keep = shared if pat.kind == 'gnm' else best(block[i], shared if pat.kind == 'vnm' else range(m), n)
                for j in keep:
                    out[r0 + i, c0 + j] = W[r0 + i, c0 + j]
    return out


@pytest.mark.parametrize('name', sorted(FORMATS))
def test_prune_keeps_the_largest_magnitudes(name):
    fmt = FORMATS[name]
    rng = np.random.default_rng(11)
    W = sparse_dense(rng, (8, 16), density=0.7, empty_rows=(2, 3))
    W[0, 5] = np.nan
    W[4, 8:12] = [3., -3., 3., 0.]  # ties: the lower offsets win
    W[5, 8:12] = 0
    want = pruned_reference(W, name)
    S = ss.convert(W, fmt, prune=True)
    np.testing.assert_array_equal(S.toarray(), want)
    assert np.isnan(S.toarray()[0, 5])
    if name == 'NM2_4':
        np.testing.assert_array_equal(S.toarray()[4, 8:12], [3., -3., 0., 0.])
    with pytest.raises(errors.PatternError, match='Pass prune=True'):
        ss.convert(W, fmt)
    # a matrix that fits converts strictly back to the same matrix (NM, GNM: the same arrays)
    P = np.nan_to_num(S.toarray(), nan=7.)
    S = ss.convert(P, fmt, prune=True)
    again = ss.convert(S.toarray(), fmt)
    np.testing.assert_array_equal(again.toarray(), P)
    if name != 'VNM2_2_8':  # VNM may fill an unused table slot with another zero column
        for member, a in S.arrays.items():
            np.testing.assert_array_equal(again.arrays[member], a, err_msg=member)


@pytest.mark.parametrize('fmt,W,match', [
    (NM24, [[0, 1, 2, 3, 0, 0, 0, 0]], r'row 0, columns 0\.\.3 hold 3 non-zeros; ss\.NM\[2, 4\] keeps at most 2'),
    (NM24, [[0] * 8, [0, 0, 0, 0, 1, 1, 1, 1]], r'row 1, columns 4\.\.7 hold 4 non-zeros'),
    (GNM224, [[1, 0, 0, 0], [0, 1, 1, 0]],
     r'rows 0\.\.1, columns 0\.\.3 hold 3 non-zero columns; ss\.GNM\[2, 2, 4\] keeps at most 2'),
    (GNM224, [[1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0], [0] * 8, [0, 0, 0, 0, 1, 0, 1, 1]],
     r'rows 2\.\.3, columns 4\.\.7 hold 3 non-zero columns'),
    (VNM228, [[1, 1, 0, 0, 0, 0, 0, 0], [0, 0, 1, 1, 1, 0, 0, 0]],
     r'rows 0\.\.1, columns 0\.\.7 hold 5 non-zero columns'),
    (VNM228, [[0] * 8, [0, 0, 1, 1, 1, 0, 0, 0]], r'row 1, columns 0\.\.7 hold 3 non-zeros; ss\.VNM\[2, 2, 8\]'),
])
def test_strict_conversion_names_rows_and_columns(fmt, W, match):
    W = np.array(W, dtype=np.float64)
    with pytest.raises(errors.PatternError, match=match):
        ss.convert(W, fmt)


@pytest.mark.parametrize('name', sorted(FORMATS))
def test_dtypes_and_inputs(name):
    fmt = FORMATS[name]
    A, want = EXAMPLES[name]
    wide = ss.convert(A, fmt, index_dtype=np.int64)
    assert all(a.dtype == np.int64 for m, a in wide.arrays.items() if m != 'vals')
    single = ss.convert(A.astype(np.float32), fmt)
    assert single.dtype == np.float32 and single.index_dtype == np.int32
    annotated = ss.convert(A, fmt[dace.float32, M, N, dace.int64])
    assert annotated.dtype == np.float32 and annotated.index_dtype == np.int64
    for S in (wide, single, annotated, ss.convert(sp.csr_array(A), fmt), ss.convert(sp.csr_matrix(A), fmt)):
        for member, w in want.items():
            np.testing.assert_array_equal(S.arrays[member], w, err_msg=f'{name}.{member}')
    # COO with duplicates (summed), one pair summing to zero in an otherwise full group
    C = sp.coo_array(A)
    r = np.concatenate([C.row, C.row, [0, 0]])
    c = np.concatenate([C.col, C.col, [1, 1]])
    v = np.concatenate([C.data / 4, 3 * C.data / 4, [1., -1.]])
    S = ss.convert(sp.coo_array((v, (r, c)), shape=A.shape), fmt)
    np.testing.assert_array_equal(S.toarray(), A)


def test_bad_shapes_parameters_and_arguments():
    for fmt in FORMATS.values():
        R, C = fmt.block
        with pytest.raises(errors.ShapeError, match=rf'shape \({R}, {C + 2}\) is not a multiple of the block {R}x{C}'):
            ss.convert(np.zeros((R, C + 2)), fmt)
        if R > 1:
            with pytest.raises(errors.ShapeError, match=rf'shape \({R + 1}, {C}\) is not a multiple'):
                ss.convert(sp.csr_array((R + 1, C)), fmt)
    with pytest.raises(errors.ArgumentError, match='prune=True needs a structured format'):
        ss.convert(EXAMPLES['NM2_4'][0], ss.CSR, prune=True)
    with pytest.raises(ValueError, match='n = 5 exceeds m = 4'):
        ss.NM[5, 4]
    with pytest.raises(TypeError, match='n must be a positive integer, got 0'):
        ss.NM[0, 4]
    with pytest.raises(ValueError, match=r'ss\.VNM\[8, 2, 3\]: .*needs m >= 4'):
        ss.VNM[8, 2, 3]
    with pytest.raises(TypeError, match=r'takes the pattern first: ss\.NM\[2, 4\]\[dace\.float32, M, N\]'):
        ss.NM[dace.float32, 4]


def test_names_views_and_structures():
    assert ss.NM[2, 4] is NM24 and get_format('NM2_4') is NM24
    assert get_format('GNM2_2_4') is GNM224 and get_format('VNM2_2_8T') is VNM228.T
    assert get_format('NM2_4T') is NM24.T and NM24.T.name == 'NM2_4T' and NM24.T.T is NM24
    A, _ = EXAMPLES['VNM2_2_8']
    S = ss.convert(A, VNM228)
    view = ss.SparseMatrix(VNM228.T, S.arrays, S.shape[::-1])
    np.testing.assert_array_equal(view.toarray(), A.T)
    for fmt in (NM24, GNM224, VNM228, VNM228.T):
        st = sparse_type_of(fmt[dace.float32, M, N, dace.int64])
        assert st.fmt is fmt and (st.dtype, st.index_dtype) == (dace.float32, dace.int64)
        assert (st.rows, st.cols) == (M, N)
    sdfg = dace.SDFG('structured_json')
    sdfg.add_datadesc('A', NM24[dace.float64, M, N])
    st = sparse_type_of(dace.SDFG.from_json(sdfg.to_json()).arrays['A'])
    assert st.fmt is NM24 and (st.rows, st.cols) == (M, N) and st.dtype == dace.float64


# ---- programs: one per format, built once, reused by every case below ----

SIGNATURES = {'NM2_4': (dace.float64, dace.int32), 'GNM2_2_4': (dace.float64, dace.int32),
              'VNM2_2_8': (dace.float32, dace.int64)}
_PROGRAMS = {}


def program(name):
    if name not in _PROGRAMS:
        vt, it = SIGNATURES[name]
        T = FORMATS[name][vt, M, N, it]

        @dace.program
        def matvec(A: T, x: vt[N], y: vt[M]):
            return A @ x, A.T @ y

        _PROGRAMS[name] = matvec
    return _PROGRAMS[name]


def operands(name, seed, shape=(8, 16)):
    vt, it = SIGNATURES[name]
    rng = np.random.default_rng(seed)
    dt = np.dtype(vt.type)
    S = ss.convert(sparse_dense(rng, shape, empty_rows=(1, 6)).astype(dt), FORMATS[name], prune=True,
                   index_dtype=np.dtype(it.type))
    return S, rng.standard_normal(shape[1]).astype(dt), rng.standard_normal(shape[0]).astype(dt)


def check_call(name, S, x, y):
    got, got_t = program(name)(S, x, y)
    tol = dict(rtol=1e-5, atol=1e-5) if x.dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, S.toarray() @ x, **tol)
    np.testing.assert_allclose(got_t, S.toarray().T @ y, **tol)


@pytest.mark.parametrize('name', sorted(FORMATS))
def test_matvec(name):
    for seed, shape in ((1, (8, 16)), (2, (4, 8)), (3, (10, 24) if name == 'NM2_4' else (6, 24))):
        check_call(name, *operands(name, seed, shape))
    A, _ = EXAMPLES[name]
    x, y = np.arange(A.shape[1], dtype=np.float64), np.arange(A.shape[0], dtype=np.float64)
    dt = np.dtype(SIGNATURES[name][0].type)
    check_call(name, ss.convert(A.astype(dt), FORMATS[name], index_dtype=np.dtype(SIGNATURES[name][1].type)),
               x.astype(dt), y.astype(dt))


def _set(member, at, value):

    def tamper(arrays):
        arrays[member][at] = value

    return tamper


OUT_OF_RANGE = r'A: {}\[{}\] = {} is out of range for a dimension of size {}'
TAMPERED = [
    ('NM2_4', _set('crd3', slice(0, 2), [1, 1]), errors.PatternError, r'A: crd3\[0:2\] = \[1, 1\]: .* twice'),
    ('NM2_4', _set('crd3', slice(2, 4), [3, 0]), errors.PatternError, r'A: crd3\[2:4\] = \[3, 0\]: .* out of order'),
    ('NM2_4', _set('crd3', 5, 4), errors.InvalidIndexError, OUT_OF_RANGE.format('crd3', 5, 4, 4)),
    ('GNM2_2_4', _set('crd3', slice(6, 8), [2, 2]), errors.PatternError, r'A: crd3\[6:8\] = \[2, 2\]: .* twice'),
    ('VNM2_2_8', _set('sel4', slice(4, 8), [0, 3, 3, 7]), errors.PatternError, r'A: sel4\[5:7\] = \[3, 3\]: .* twice'),
    ('VNM2_2_8', _set('crd4', 3, 4), errors.InvalidIndexError, OUT_OF_RANGE.format('crd4', 3, 4, 4)),
    ('VNM2_2_8', _set('sel4', 0, 8), errors.InvalidIndexError, OUT_OF_RANGE.format('sel4', 0, 8, 8)),
]


@pytest.mark.parametrize('name,tamper,error,match', TAMPERED,
                         ids=[f'{t[0]}-{t[2].__name__}-{k}' for k, t in enumerate(TAMPERED)])
def test_tampered_storage_is_refused_before_the_call(name, tamper, error, match):
    S, x, y = operands(name, 4)
    arrays = {m: a.copy() for m, a in S.arrays.items()}
    tamper(arrays)
    kept = {m: a.copy() for m, a in arrays.items()}
    x0 = x.copy()
    with pytest.raises(error, match=match):
        program(name)(ss.SparseMatrix(FORMATS[name], arrays, S.shape), x, y)
    for m, a in arrays.items():
        np.testing.assert_array_equal(a, kept[m], err_msg=m)
    np.testing.assert_array_equal(x, x0)


@pytest.mark.parametrize('name', sorted(FORMATS))
def test_wrong_lengths_and_shapes_are_refused(name):
    S, x, y = operands(name, 5)
    arrays = dict(S.arrays, vals=S.arrays['vals'][:-1])
    with pytest.raises(errors.IndptrError, match=rf'A: vals \(data\) has {S.arrays["vals"].size - 1} entries, expected '
                       rf'{S.arrays["vals"].size}'):
        program(name)(ss.SparseMatrix(FORMATS[name], arrays, S.shape), x, y)
    R, C = FORMATS[name].block
    bad = (S.shape[0] + R, S.shape[1] - 1) if name == 'NM2_4' else (S.shape[0] - 1, S.shape[1])
    with pytest.raises(errors.ShapeError,
                       match=rf'A: shape \({bad[0]}, {bad[1]}\) is not a multiple of the block shape {R}x{C}'):
        program(name)(ss.SparseMatrix(FORMATS[name], S.arrays, bad), np.zeros(bad[1], x.dtype),
                      np.zeros(bad[0], x.dtype))


def test_scipy_argument_where_nm_is_annotated():
    S, x, y = operands('NM2_4', 6)
    with pytest.raises(errors.FormatMismatchError,
                       match=r'expects NM2_4 but got CSR .*ss\.convert\(A, ss\.NM\[2, 4\]\)'):
        program('NM2_4')(sp.csr_array(S.toarray()), x, y)


def test_calls_from_threads():
    cases = [operands('GNM2_2_4', 20 + t, (2 * (t + 2), 4 * (t % 3 + 2))) for t in range(8)]
    program('GNM2_2_4')(*cases[0])  # built once, before the threads call it
    failures = []

    def work(t):
        try:
            for _ in range(5):
                check_call('GNM2_2_4', *cases[t])
        except Exception as ex:  # noqa: BLE001  (reported below, with the thread)
            failures.append((t, repr(ex)))

    from_threads(work)
    assert not failures, failures


# ---- faults these tests found (fixed) ----


def test_wrong_length_table_is_refused():
    from sdfgsparse.runtime.marshal import marshal_sparse
    S, _, _ = operands('VNM2_2_8', 7)
    st = sparse_type_of(VNM228[dace.float32, M, N, dace.int64])
    sel = S.arrays['sel4']
    for wrong in (sel[:-4], np.concatenate([sel, sel[:4]])):  # checked on the host only: no kernel reads it
        with pytest.raises(errors.IndptrError, match=rf'A: sel4 has {wrong.size} entries, expected {sel.size}'):
            marshal_sparse('A', ss.SparseMatrix(VNM228, dict(S.arrays, sel4=wrong), S.shape), st)


@pytest.mark.parametrize('name', sorted(FORMATS))
def test_matrix_without_columns_converts(name):
    for A in (np.zeros((8, 0)), sp.csr_array((8, 0))):
        S = ss.convert(A, FORMATS[name])
        assert S.shape == (8, 0) and all(a.size == 0 for a in S.arrays.values())


def test_pattern_parameters_are_checked_every_time():
    assert ss.NM[2, 4] is NM24
    with pytest.raises(TypeError, match='pattern parameters are positive integers, got 2.0'):
        ss.NM[2.0, 4]
