"""Coverage-guided fuzzing (atheris / libFuzzer) of the argument checks: ``make fuzz``.

Not part of the test suite (it runs until ``-max_total_time`` seconds). Each input
becomes a CSR matrix whose arrays are taken as they are (scipy does not check assigned
arrays), a dense vector in some layout or a piece of junk, and one of four ways in: the
annotated program (first and warm calls: the plan, its compiled storage check, the full
path), the unannotated one, ``ss.compile`` of the annotated SDFG, and the host function
``ss.relu``. The oracle:

* a call is accepted exactly when the arrays make a valid matrix for that way in (a
  naive check below, written independently of sdfgsparse), and then the result equals a
  naive product;
* a call is refused only with an ``ss.errors`` error, and never modifies its inputs.

Anything else (another exception, a wrong result, an accepted invalid matrix, a crash)
is a finding: libFuzzer stops and writes the input to ``crash-*``; run the script on that
file to replay it.
"""
import os
import sys
import warnings

import atheris

with atheris.instrument_imports(include=['sdfgsparse']):
    import sdfgsparse as ss
    from sdfgsparse import errors

import dace  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

M, N = dace.symbol('M'), dace.symbol('N')


@dace.program
def fz_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


@dace.program
def fz_any(A, x):
    return A @ x


COMPILED = ss.compile(fz_spmv.to_sdfg())
VALUE_DTYPES = [np.float64, np.float32, np.int64, np.int32, np.complex128, np.bool_]
INDEX_DTYPES = [np.int32, np.int64, np.int16, np.uint32, np.float64]
JUNK = [None, 'abc', 3.5, (1.0, 2.0), [1.0, 2.0], {'a': 1}, b'xy']


def _ints(fdp, count, lo, hi):
    return [fdp.ConsumeIntInRange(lo, hi) for _ in range(count)]


def valid(indptr, indices, data, shape, index_ok):
    """Whether the arrays make a CSR matrix sdfgsparse must accept: positions from 0 to
    nnz, never decreasing, one per row plus one; indices in range, increasing within a
    row; as many values as indices; integer indices (another width than the program's is
    copied)."""
    m, n = shape
    if not index_ok or len(indptr) != m + 1 or len(indices) != len(data):
        return False
    if indptr[0] != 0 or indptr[-1] != len(indices) or any(b < a for a, b in zip(indptr, indptr[1:])):
        return False
    for r in range(m):
        row = list(indices[indptr[r]:indptr[r + 1]])
        if any(not 0 <= c < n for c in row) or any(b <= a for a, b in zip(row, row[1:])):
            return False
    return True


def naive(indptr, indices, data, shape, x):
    y = np.zeros(shape[0], dtype=np.result_type(data.dtype, x.dtype))
    for r in range(shape[0]):
        for p in range(indptr[r], indptr[r + 1]):
            y[r] += data[p] * x[indices[p]]
    return y


def one_input(buf: bytes):
    fdp = atheris.FuzzedDataProvider(buf)
    m, n = fdp.ConsumeIntInRange(0, 6), fdp.ConsumeIntInRange(0, 6)
    way = fdp.ConsumeIntInRange(0, 3)
    vdt = VALUE_DTYPES[fdp.ConsumeIntInRange(0, len(VALUE_DTYPES) - 1)]
    idt = INDEX_DTYPES[fdp.ConsumeIntInRange(0, len(INDEX_DTYPES) - 1)]
    nnz = fdp.ConsumeIntInRange(0, 10)
    indptr = _ints(fdp, m + 1 + fdp.ConsumeIntInRange(-1, 1), -2, 12)
    indices = _ints(fdp, nnz + fdp.ConsumeIntInRange(-1, 1), -2, 8)
    data = np.array([fdp.ConsumeIntInRange(-4, 4) for _ in range(nnz)], dtype=vdt)
    xkind = fdp.ConsumeIntInRange(0, 9)
    if xkind < len(JUNK):
        x = JUNK[xkind]
    else:
        base = np.arange(2 * (n + 1), dtype=np.float64) - 3
        x = [base[:n], base[:2 * n:2], base[:n + 1]][xkind - len(JUNK)]
    A = sp.csr_array((m, n))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)  # -2 as uint32 wraps, as intended
        A.indptr, A.indices, A.data = np.array(indptr).astype(idt), np.array(indices).astype(idt), data
    indptr, indices = A.indptr.tolist(), A.indices.tolist()  # the values the call sees
    if fdp.ConsumeBool() and A.data.size:
        A.data = A.data.reshape(-1, 1)
    kept = (A.indptr.copy(), A.indices.copy(), A.data.copy(), np.copy(x) if isinstance(x, np.ndarray) else None)
    prog = [fz_spmv, fz_any, lambda A, x: COMPILED(A=A, x=x), None][way]
    int_index = np.issubdtype(idt, np.integer)  # other integer widths are copied (CopyWarning)
    if prog is None:
        ok = valid(indptr, indices, data, (m, n), int_index) and A.data.ndim == 1 and vdt in (
            np.float64, np.float32, np.int64, np.int32)
        call = lambda: ss.relu(A)  # noqa: E731
    else:
        annotated = way != 1
        dtype_ok = vdt == np.float64 if annotated else vdt in (np.float64, np.float32, np.int64, np.int32)
        x_ok = isinstance(x, np.ndarray) and x.shape == (n, )  # (a number: A @ 3.5 is refused, as in scipy)
        ok = valid(indptr, indices, data, (m, n), int_index) and A.data.ndim == 1 and dtype_ok and x_ok
        call = lambda: prog(A, x)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            got = call()
        except errors.SparseError as ex:
            if ok:
                raise AssertionError(f'a valid call was refused: way {way}, {m}x{n} {vdt.__name__}/'
                                     f'{idt.__name__} indptr={indptr} indices={indices} x={x!r}: '
                                     f'{type(ex).__name__}: {ex}') from ex
        else:
            if not ok and os.environ.get('FUZZ_DEBUG') and prog is fz_any:
                from sdfgsparse.runtime.plan import MISS
                for key, plans in fz_any._ss_plans.items():
                    for p in plans:
                        r = p.run((A, x))
                        print('PLAN', key, [d.dims for d in p.dense_slots], len(p.shape_rules),
                              'HIT' if r is not MISS else 'miss', file=sys.stderr)
                for key, (c, _) in fz_any._ss_fast.items():
                    print('FAST', key, c.sdfg.arrays['x'].shape, c.__dict__.get('_ss_shape_rules'), file=sys.stderr)
            if not ok:
                raise AssertionError(f'an invalid call was accepted: way {way}, {m}x{n} {vdt.__name__}/'
                                     f'{idt.__name__} indptr={indptr} indices={indices} x={x!r}')
            if prog is None:
                want = np.maximum(A.data, 0)
                if not np.array_equal(got.data, want):
                    raise AssertionError(f'relu: {got.data} != {want}')
            else:
                want = naive(indptr, indices, data, (m, n), x)
                if not np.allclose(got, want):
                    raise AssertionError(f'wrong result: way {way}: {got} != {want}')
    after = (A.indptr, A.indices, A.data, x if isinstance(x, np.ndarray) else None)
    for a, b in zip(kept, after):
        if a is not None and not np.array_equal(a, b):
            raise AssertionError('an input was modified')


def main():
    A = sp.csr_array(np.eye(3))
    for prog in (fz_spmv, fz_any):  # build before fuzzing: a compile inside would be a "slow unit"
        prog(A, np.ones(3))
    COMPILED(A=A, x=np.ones(3))
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == '__main__':
    os.environ.setdefault('DACE_cache', 'hash')
    main()
