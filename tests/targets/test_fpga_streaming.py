"""The streaming FPGA designs of CSR products (``sdfgsparse.targets.fpga.streaming``), in
C-simulation against scipy: every format (converted to CSR on the host), design
variants (vector width, accumulators, columns that are not a multiple of a pass), fused
epilogues, intermediates, and the checks of a design's parameters."""
import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import errors
from sdfgsparse.targets.fpga import Design, design_of, lower
from sparse_zoo import FORMATS, REAL, as_format, real_matrix, zoo

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('fpga')]

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


def designs(prog):
    low = prog.lowered
    return [design_of(st) for st in low.states() if design_of(st)]


def products(fmt, vt=dace.float32, it=dace.int32, design=None):
    F = ss.BSR.with_block(2, 2) if fmt == 'BSR' else getattr(ss, fmt)

    @dace.program
    def fpga_products(A: F[vt, M, N, it], B: vt[N, K], x: vt[N]):
        return A @ B, A @ x

    return ss.compile(fpga_products, target='fpga', design=design)


def check(prog, A, a, k, npv, seed=0):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((A.shape[1], k)).astype(npv)
    x = rng.standard_normal(A.shape[1]).astype(npv)
    keep = (B.copy(), x.copy())
    Y, y = prog(a, B, x)
    Ad = A.toarray().astype(np.float64)
    tol = dict(rtol=1e-4, atol=1e-4) if npv == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(Y, Ad @ B, **tol)
    np.testing.assert_allclose(y, Ad @ x, **tol)
    np.testing.assert_array_equal(keep[0], B)
    np.testing.assert_array_equal(keep[1], x)


@pytest.mark.parametrize('fmt', FORMATS)
def test_products_stream_in_every_format(fmt):
    """A @ B and A @ x are streaming designs in every format (a non-CSR argument is made
    CSR in the lowered program and converted on the host), over the zoo (CSR: and the real
    matrices); the caller's matrix keeps its format and is not modified."""
    prog = products(fmt)
    assert sorted(d['op'] for d in designs(prog)) == ['spmm', 'spmv']
    assert list(lower.converted_arguments(prog.lowered)) == ([] if fmt == 'CSR' else ['A'])
    rng = np.random.default_rng(3)
    cases = list(zoo(np.float32).items())
    if fmt == 'BSR':
        cases = [(n, A) for n, A in cases if A.shape[0] % 2 == 0 and A.shape[1] % 2 == 0]
    if fmt == 'CSR':
        cases += [(n, real_matrix(n, np.float32)) for n in REAL]
    for i, (name, A) in enumerate(cases):
        a = as_format(A, fmt, np.int32, rng)
        before = a.copy() if sp.issparse(a) else None
        kept = None if before is not None else {m: v.copy() for m, v in a.arrays.items()}
        try:
            check(prog, A, a, 1 + i % 9, np.float32, seed=i)
        except AssertionError as ex:
            raise AssertionError(f'{fmt} {name}: {ex}') from ex
        if before is not None:
            assert a.format == before.format and (a != before).nnz == 0
        else:  # (a SparseMatrix of a format scipy has no twin for)
            assert all(np.array_equal(v, kept[m]) for m, v in a.arrays.items())


@pytest.mark.parametrize('W,P', [(1, 1), (2, 3), (8, 2)])
def test_design_variants(W, P):
    """Vector widths and accumulators: K below, at and above one pass (W * P columns), not
    a multiple of it, and K = 1; float64 with int64 indices."""
    prog = products('CSR', dace.float64, dace.int64, Design(vector_width=W, accumulators=P))
    assert {d['design'].vector_width for d in designs(prog)} == {W, 1}  # (an SpMV has one lane)
    rng = np.random.default_rng(W * 10 + P)
    A = sp.random_array((33, 21), density=0.2, format='csr', rng=rng)
    A = A.tolil()
    A[0, :] = 0
    A[32, :] = 0
    A = sp.csr_array(A)
    for k in sorted({1, W * P - 1 or 1, W * P, W * P + 1, 2 * W * P + 3}):
        check(prog, A, A, k, np.float64, seed=k)
    check(prog, sp.csr_array((5, 4)), sp.csr_array((5, 4)), 3, np.float64)  # no entries


def test_epilogues_in_the_writer():
    """``ss.optimize`` fuses the element-wise epilogues into the SpMM; the streaming writer
    applies them lane by lane: a column bias with relu (the GCN layer), a row scale, and a
    function of the value alone."""

    @dace.program
    def fpga_epilogues(A: ss.CSR[dace.float32, M, N, dace.int32], X: dace.float32[N, K], b: dace.float32[K],
                       r: dace.float32[M]):
        return np.maximum(A @ X + b, 0), (A @ X) * np.reshape(r, (M, 1)), np.tanh(A @ X)

    opt = ss.optimize(fpga_epilogues, target='fpga')
    got = sorted(bool(d['epilogue']) for d in designs(opt))
    assert got == [True, True, True], designs(opt)
    assert 'streaming designs: spmm + epilogue' in opt.report()
    rng = np.random.default_rng(11)
    A = sp.random_array((30, 25), density=0.15, format='csr', dtype=np.float32, rng=rng)
    for k in (3, 16, 21):
        X = rng.standard_normal((25, k)).astype(np.float32)
        b = rng.standard_normal(k).astype(np.float32)
        r = rng.standard_normal(30).astype(np.float32)
        Y = A.toarray().astype(np.float64) @ X
        want = (np.maximum(Y + b, 0), Y * r[:, None], np.tanh(Y))
        for g, w in zip(opt(A, X, b, r), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_an_intermediate_streams():
    """``(A + B) @ x``: the sum is computed by one kernel into arrays sized by a capacity;
    the product streams its entries, counted from the sum's row pointers."""

    @dace.program
    def fpga_sum_product(A: ss.CSR[dace.float64, M, N, dace.int32], B: ss.CSR[dace.float64, M, N, dace.int32],
                         X: dace.float64[N, K]):
        return (A + B) @ X

    prog = ss.compile(fpga_sum_product, target='fpga')
    assert [d['op'] for d in designs(prog)] == ['spmm']
    rng = np.random.default_rng(2)
    for m, n in ((20, 15), (7, 9)):
        A = sp.random_array((m, n), density=0.3, format='csr', rng=rng)
        B = sp.random_array((m, n), density=0.3, format='csr', rng=rng)
        X = rng.standard_normal((n, 6))
        np.testing.assert_allclose(prog(A, B, X), (A + B).toarray() @ X, rtol=1e-10, atol=1e-10)


def test_design_parameters_are_checked():
    for bad in (dict(vector_width=3), dict(vector_width=0), dict(accumulators=-1), dict(pumping=3),
                dict(vector_width=2, pumping=4), dict(depth=True), dict(vector_width=2.0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Design(**bad)
    assert Design(vector_width=8, accumulators=2).tile == 16

    @dace.program
    def fpga_spmv(A: ss.CSR[dace.float32, M, N, dace.int32], x: dace.float32[N]):
        return A @ x

    with pytest.raises(errors.UnsupportedOperationError, match="design= is for target='fpga'"):
        ss.compile(fpga_spmv, design=Design())
    with pytest.raises(errors.ArgumentError, match='must be a sdfgsparse.targets.fpga.Design'):
        ss.compile(fpga_spmv, target='fpga', design={'vector_width': 4})


@pytest.mark.parametrize('vt,W,P,F', [(dace.float32, 4, 2, 1), (dace.float64, 2, 3, 1), (dace.float32, 4, 1, 2),
                                      (dace.float32, 8, 1, 4)])
def test_sddmm_streams(vt, W, P, F):
    """SDDMM as a streaming design (X's rows and Y's columns gathered, the products
    multiplied in the pumpable element, reduced per entry, written per pass): over the
    zoo and passes of W * P columns that K does not fill, pumped or not, against scipy;
    the result keeps A's pattern (explicit zeros included: ``A * (X @ Y)`` on A's
    entries)."""

    @dace.program
    def fpga_sddmm(A: ss.CSR[vt, M, N, dace.int32], X: vt[M, K], Y: vt[K, N]):
        return ss.sddmm(A, X, Y)

    prog = ss.compile(fpga_sddmm, target='fpga', design=Design(vector_width=W, accumulators=P, pumping=F))
    assert [(d['op'], d['design'].pumping) for d in designs(prog)] == [('sddmm', F)]
    npv = np.dtype(vt.type)
    rng = np.random.default_rng(W * P * F)
    tol = dict(rtol=1e-4, atol=1e-4) if npv == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for i, (name, A) in enumerate(zoo(npv).items()):
        k = (1, W * P, W * P + 3, 2 * W * P)[i % 4]
        X = rng.standard_normal((A.shape[0], k)).astype(npv)
        Y = rng.standard_normal((k, A.shape[1])).astype(npv)
        out = prog(A, X, Y)
        assert out.format == 'csr' and out.nnz == A.nnz, name
        np.testing.assert_array_equal(out.indptr, A.indptr)
        np.testing.assert_array_equal(out.indices, A.indices)
        want = A.toarray().astype(np.float64) * (X.astype(np.float64) @ Y)
        np.testing.assert_allclose(out.toarray(), want, **tol, err_msg=name)


def test_pumped_products_equal_unpumped():
    """The multiply element pumped by 2 and by 4 (``SparseMultiPumping`` through
    ``Design.pumping``): A @ B bit for bit equal to the unpumped design, A @ x (one lane,
    never pumped) too; the lowered program has the pumped element's gearboxes."""
    from dace.libraries.standard import Gearbox
    progs = {f: products('CSR', design=Design(vector_width=4, accumulators=2, pumping=f)) for f in (1, 2, 4)}
    for f, prog in progs.items():
        gearboxes = [n for st in prog.lowered.states() for n in st.nodes() if isinstance(n, Gearbox)]
        assert len(gearboxes) == (0 if f == 1 else 3), f
    rng = np.random.default_rng(6)
    for name, A in list(zoo(np.float32).items())[:6]:
        B = rng.standard_normal((A.shape[1], 11)).astype(np.float32)
        x = rng.standard_normal(A.shape[1]).astype(np.float32)
        base = progs[1](A, B, x)
        np.testing.assert_allclose(base[0], A.toarray() @ B, rtol=1e-4, atol=1e-4)
        for f in (2, 4):
            got = progs[f](A, B, x)
            np.testing.assert_array_equal(got[0], base[0], err_msg=f'{name} F={f}')
            np.testing.assert_array_equal(got[1], base[1], err_msg=f'{name} F={f}')


def test_reserved_names_and_degenerate_sizes():
    """A program whose size symbol is named like a design's loop variable takes the
    portable expansion (it hung in simulation when streamed); an SDDMM with K = 0 gives
    zeros on A's pattern (one pass of padding), an SpMM with K = 0 an empty result."""

    SQ = dace.symbol('_sq')

    @dace.program
    def fpga_reserved(A: ss.CSR[dace.float32, M, N, dace.int32], B: dace.float32[N, SQ]):
        return A @ B

    prog = ss.compile(fpga_reserved, target='fpga')
    assert designs(prog) == []
    rng = np.random.default_rng(9)
    A = sp.random_array((12, 9), density=0.3, format='csr', dtype=np.float32, rng=rng)
    B = rng.standard_normal((9, 5)).astype(np.float32)
    np.testing.assert_allclose(prog(A, B), A.toarray() @ B, rtol=1e-5, atol=1e-5)

    @dace.program
    def fpga_sddmm_k0(A: ss.CSR[dace.float32, M, N, dace.int32], X: dace.float32[M, K], Y: dace.float32[K, N]):
        return ss.sddmm(A, X, Y)

    prog = ss.compile(fpga_sddmm_k0, target='fpga')
    assert [d['op'] for d in designs(prog)] == ['sddmm']
    for _ in range(2):  # (the result's values come from uninitialised memory unless written)
        out = prog(A, np.zeros((12, 0), np.float32), np.zeros((0, 9), np.float32))
        assert out.nnz == A.nnz and not np.any(out.data)
