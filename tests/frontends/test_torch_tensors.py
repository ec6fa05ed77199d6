"""``ss.torch.compile`` of torch sparse COO tensors of rank 3 (and 4): ``torch.bmm``,
``torch.sum`` / ``torch.sparse.sum``, scaling, negation and ``relu``, each compiled model
against eager torch on the same inputs (seeded, genuinely sparse: an empty batch slice, no
entries at all, duplicates in an uncoalesced tensor; float32 and float64; torch's int64
indices), dense operands in other layouts, and the typed errors of a wrong call.

What torch refuses itself is recorded as such (torch 2.13): ``torch.matmul`` / ``@`` and
``torch.einsum`` of a sparse 3-D tensor fail in eager torch and in ``torch.export`` alike
(their ATen decompositions ``expand`` or ``reshape`` the sparse operand), so no graph reaches
the frontend; ``torch.bmm`` is the one batched product torch has for them."""
import re

import pytest

import sdfgsparse as ss

torch = pytest.importorskip('torch')

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('torch_frontend')]

DTYPES = (torch.float32, torch.float64)


# ---------------------------------------------------------------------- inputs
def coo(shape, seed, dtype=torch.float64, density=0.3, empty=1):
    """A sparse COO tensor (coalesced) with about ``density`` of its entries stored and no
    entry in slice ``empty`` of its first dimension (None: none emptied)."""
    g = torch.Generator().manual_seed(seed)
    D = torch.randn(*shape, generator=g, dtype=dtype)
    D[torch.rand(*shape, generator=g) > density] = 0
    if empty is not None:
        D[empty] = 0
    return D.to_sparse_coo()


def uncoalesced(shape, seed, nnz=12, dtype=torch.float64):
    """An uncoalesced COO tensor: unsorted coordinates, half of them twice (torch sums
    duplicates), nothing in slice 1 of the first dimension."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randint(0, n, (nnz, ), generator=g) for n in shape])
    idx[0][idx[0] == 1] = 0
    idx = torch.cat([idx, idx[:, :nnz // 2].flip(1)], dim=1)
    T = torch.sparse_coo_tensor(idx, torch.randn(idx.shape[1], generator=g, dtype=dtype), shape)
    assert not T.is_coalesced()
    return T


def no_entries(shape, dtype=torch.float64):
    return torch.sparse_coo_tensor(torch.zeros(len(shape), 0, dtype=torch.int64), torch.zeros(0, dtype=dtype), shape)


def dense(shape, seed, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def column_major(D):
    """``D`` with each batch's matrix stored by columns (Fortran order per batch)."""
    F = D.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert not F.is_contiguous() and torch.equal(F, D)
    return F


def same(got, want, what):
    """torch's layout and values (a sparse result compared densely)."""
    got = got if isinstance(got, tuple) else (got, )
    want = want if isinstance(want, tuple) else (want, )
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.layout == w.layout, f'{what} result {k}: {g.layout}, torch {w.layout}'
        assert g.dtype == w.dtype and g.shape == w.shape, f'{what} result {k}: {g.dtype} {g.shape}, torch {w}'
        g = g.to_dense() if g.layout != torch.strided else g
        w = w.to_dense() if w.layout != torch.strided else w
        torch.testing.assert_close(g, w, msg=f'{what} result {k}')


def run(compiled, fn, *inputs, what=''):
    """The compiled model and eager torch on ``inputs``; nothing the caller passed is written."""
    before = [t.clone() for t in inputs]
    with torch.no_grad():
        got = compiled(*inputs)
    same(got, fn(*inputs), what)
    for t, b in zip(inputs, before):
        if t.layout == torch.strided:
            assert torch.equal(t, b)
        else:
            assert torch.equal(t._values(), b._values()) and torch.equal(t._indices(), b._indices())
    return got


def translated(fn, inputs, fallback='raise'):
    compiled = ss.torch.compile(fn, inputs, fallback=fallback)
    if fallback == 'raise':
        assert compiled.graph_breaks() == []
    return compiled


# ---------------------------------------------------------------------- the models
# (modules: torch.export names the graph's inputs after forward's arguments, t and d)
class Bmm(torch.nn.Module):

    def forward(self, T, D):
        return torch.bmm(T, D)


class Sums(torch.nn.Module):

    def forward(self, T):
        return (torch.sum(T, 1), torch.sum(T, (0, 2)), torch.sum(T, dim=-1), torch.sparse.sum(T, 2).to_dense(),
                torch.sparse.sum(T), torch.sum(T), torch.sum(T, 1).sum(0))


class Scaled(torch.nn.Module):

    def forward(self, T):
        return T * 2.0, -T, T / 4.0, (T * 3).to_dense(), torch.relu(T)


class Rank4(torch.nn.Module):

    def forward(self, T):
        return torch.sum(T, (1, 3)), T * 0.5, -T, torch.sum(T, 2).to_dense()


class Matrix(torch.nn.Module):

    def forward(self, A):
        return torch.sum(A, 1), torch.sum(A), -A


bmm, sums, scaled, rank4, matrix = Bmm(), Sums(), Scaled(), Rank4(), Matrix()


@pytest.fixture(scope='module', params=DTYPES, ids=str)
def compiled_bmm(request):
    dt = request.param
    return dt, translated(bmm, (coo((3, 4, 5), 0, dt), dense((3, 5, 2), 1, dt)))


@pytest.fixture(scope='module', params=DTYPES, ids=str)
def compiled_sums(request):
    dt = request.param
    return dt, translated(sums, (coo((3, 4, 5), 2, dt), ))


@pytest.fixture(scope='module', params=DTYPES, ids=str)
def compiled_scaled(request):
    dt = request.param
    return dt, translated(scaled, (coo((3, 4, 5), 3, dt), ))


# ---------------------------------------------------------------------- torch.bmm
def test_bmm_is_an_einsum_over_the_entries_with_symbolic_sizes(compiled_bmm):
    """One SDFG, ``np.einsum('bij,bjk->bik', T, D)``: T's batch and inner sizes are D's
    (unified symbols), every size a symbol, the indices int64 (torch COO's only dtype)."""
    dt, compiled = compiled_bmm
    src = compiled.source
    assert "np.einsum('bij,bjk->bik', t_t, t_d)" in src, src
    kind = 'float32' if dt == torch.float32 else 'float64'
    m = re.search(rf't_t: ss\.COO\[dace\.{kind}, (S\d+), (S\d+), (S\d+), dace\.int64\], '
                  rf't_d: dace\.{kind}\[(S\d+), (S\d+), (S\d+)\]', src)
    assert m, src
    b, _, k, b2, k2, _ = m.groups()
    assert (b, k) == (b2, k2) and len(set(m.groups())) == 4
    nodes = [n for n, _ in compiled.sdfg.all_nodes_recursive() if isinstance(n, ss.ops.SparseLibraryNode)]
    assert len(nodes) == 1


def test_bmm_matches_torch(compiled_bmm):
    dt, compiled = compiled_bmm
    T, D = coo((3, 4, 5), 10, dt), dense((3, 5, 2), 11, dt)
    assert T._indices().dtype == torch.int64 and T._nnz() > 0
    got = run(compiled, bmm, T, D, what='bmm')
    assert got.is_contiguous() and torch.count_nonzero(got[1]) == 0  # the empty batch
    calls = compiled.calls['sdfg']
    # another size (the symbols), and more entries than the example had: no recompiling
    run(compiled, bmm, coo((2, 6, 3), 12, dt, density=0.6, empty=0), dense((2, 3, 4), 13, dt), what='bmm 2x6x3')
    run(compiled, bmm, uncoalesced((3, 4, 5), 14, dtype=dt), dense((3, 5, 3), 15, dt), what='bmm uncoalesced')
    run(compiled, bmm, no_entries((3, 4, 5), dt), dense((3, 5, 2), 16, dt), what='bmm without entries')
    assert compiled.calls['sdfg'] == calls + 3


@pytest.mark.parametrize('layout', ['column_major', 'strided', 'batch_stride'])
def test_bmm_reads_dense_operands_in_any_layout(compiled_bmm, layout):
    """A dense operand stored by columns, every other column of a wider one, or every
    other batch of a longer one: the same result as torch's."""
    dt, compiled = compiled_bmm
    D = {'column_major': lambda: column_major(dense((3, 5, 2), 20, dt)),
         'strided': lambda: dense((3, 5, 4), 21, dt)[:, :, ::2],
         'batch_stride': lambda: dense((6, 5, 2), 22, dt)[::2]}[layout]()
    assert not D.is_contiguous()
    run(compiled, bmm, coo((3, 4, 5), 23, dt), D, what=f'bmm {layout}')


def test_dense_bmm_is_a_batched_product():
    X, Y = dense((2, 3, 4), 30), column_major(dense((2, 4, 5), 31))
    compiled = translated(bmm, (X, Y))
    assert 't_bmm = t_t @ t_d' in compiled.source
    run(compiled, bmm, X, Y, what='dense bmm')


# ---------------------------------------------------------------------- sums
def test_sums_match_torch(compiled_sums):
    """Sums over one axis, several, a negative one, ``torch.sparse.sum`` (then
    ``to_dense``), every axis, and a sum of a sum: COO results where torch's are (the
    program's dense sums, handed over coalesced), dense 0-d ones for whole sums."""
    dt, compiled = compiled_sums
    assert 't_sum_1 = t_t.sum(axis=1)' in compiled.source and '.sum(axis=(0, 2))' in compiled.source
    for k, T in enumerate([coo((3, 4, 5), 40, dt), uncoalesced((3, 4, 5), 41, dtype=dt), no_entries((3, 4, 5), dt),
                           coo((5, 2, 7), 42, dt, density=0.5, empty=4)]):
        got = run(compiled, sums, T, what=f'sums of input {k}')
        for r in (got[0], got[1], got[2], got[6]):
            assert r.layout == torch.sparse_coo and r.is_coalesced()


def test_a_sum_torch_keeps_sparse_crosses_a_graph_break_as_coo():
    """A sum (dense in the program) read by an operation that runs in torch (``fallback=
    'torch'``): torch gets the COO tensor it would have made; a later program that reads
    the sum again gets it dense."""

    def fn(T, W):
        s = torch.sum(T, 1)
        return torch.relu(s), torch.mm(s, W)

    T, W = coo((3, 4, 5), 50), dense((5, 2), 51)
    compiled = translated(fn, (T, W), fallback='torch')
    breaks = compiled.graph_breaks()
    assert len(breaks) == 1 and 'torch makes a torch.sparse_coo result, the translation a dense one' in breaks[0]
    assert len(compiled.sdfgs) == 2
    got = run(compiled, fn, T, W, what='sum then a graph break')
    assert got[0].layout == torch.sparse_coo
    run(compiled, fn, uncoalesced((2, 6, 5), 52), W, what='sum then a graph break, another size')


def test_sparse_matrix_sums_and_negation():
    """The same for a 2-D COO tensor (its sums are COO in torch too); ``-A`` keeps A's
    pattern."""
    A = coo((6, 5), 60, empty=2)
    compiled = translated(matrix, (A, ))
    run(compiled, matrix, A, what='matrix')
    run(compiled, matrix, uncoalesced((4, 7), 61), what='uncoalesced matrix')


# ---------------------------------------------------------------------- element-wise
def test_scaling_and_negation_keep_the_pattern(compiled_scaled):
    """``T * 2.0``, ``-T``, ``T / 4.0`` and ``relu(T)``: COO results on T's pattern;
    ``to_dense`` of a sparse tensor: an einsum into a dense array, transposed back."""
    dt, compiled = compiled_scaled
    src = compiled.source
    assert 't_t * 2.0' in src and '-t_t' in src and 't_t * 0.25' in src and 'ss.relu(t_t)' in src
    assert "np.transpose(np.einsum('abc->bac', t_mul_1), axes=(1, 0, 2))" in src
    for k, T in enumerate([coo((3, 4, 5), 70, dt), uncoalesced((3, 4, 5), 71, dtype=dt), no_entries((3, 4, 5), dt)]):
        got = run(compiled, scaled, T, what=f'scaled input {k}')
        for r in (got[0], got[1], got[2], got[4]):
            assert r.layout == torch.sparse_coo and r._nnz() == T.coalesce()._nnz()


def test_a_value_function_of_duplicates_is_of_their_sum(compiled_scaled):
    """relu of an entry stored twice (2 and -3) is relu(-1) = 0, as in torch (the segment
    coalesces an uncoalesced COO input first)."""
    dt, compiled = compiled_scaled
    U = torch.sparse_coo_tensor(torch.tensor([[0, 0, 2], [1, 1, 0], [2, 2, 4]]), torch.tensor([2.0, -3.0, 1.5],
                                                                                             dtype=dt), (3, 4, 5))
    got = run(compiled, scaled, U, what='duplicates')
    assert got[4].to_dense()[0, 1, 2] == 0 and got[4].to_dense()[2, 0, 4] == 1.5


def test_rank_4():
    T = coo((2, 3, 4, 5), 80, density=0.4, empty=0)
    compiled = translated(rank4, (T, ))
    assert re.search(r't_t: ss\.COO\[dace\.float64, S\d+, S\d+, S\d+, S\d+, dace\.int64\]', compiled.source)
    run(compiled, rank4, T, what='rank 4')
    run(compiled, rank4, uncoalesced((2, 3, 2, 4), 81), what='rank 4 uncoalesced')


# ---------------------------------------------------------------------- what torch refuses
@pytest.mark.parametrize('name', ['matmul', 'matmul_2d', 'at', 'einsum', 'einsum_ttv'])
def test_matmul_and_einsum_of_a_sparse_tensor_fail_in_torch_itself(name):
    """torch.matmul / @ expand or reshape the sparse operand (torch 2.13), torch.einsum
    reshapes it: eager torch fails, and torch.export with it; the error names torch's."""
    fn, D, message = {
        'matmul': (lambda T, D: torch.matmul(T, D), dense((3, 5, 2), 1), 'expand is unsupported for Sparse tensors'),
        'matmul_2d': (lambda T, D: torch.matmul(T, D), dense((5, 2), 1),
                      'expand is unsupported for Sparse tensors|reshape is not implemented for sparse tensors'),
        'at': (lambda T, D: T @ D, dense((3, 5, 2), 1), 'expand is unsupported for Sparse tensors'),
        'einsum': (lambda T, D: torch.einsum('bij,bjk->bik', T, D), dense((3, 5, 2), 1),
                   'reshape is not implemented for sparse tensors'),
        'einsum_ttv': (lambda T, v: torch.einsum('ijk,k->ij', T, v), dense((5, ), 1),
                       'reshape is not implemented for sparse tensors'),
    }[name]
    T = coo((3, 4, 5), 0)
    with pytest.raises(RuntimeError, match=message):
        fn(T, D)
    with pytest.raises(ss.errors.UnsupportedOperationError,
                       match=f'torch.export could not capture the model: RuntimeError: ({message})'):
        ss.torch.compile(fn, (T, D))


# ---------------------------------------------------------------------- what the frontend refuses
@pytest.mark.parametrize('fn, message', [
    (lambda T: torch.sum(T, 1, keepdim=True), r'sum of a sparse tensor with keepdim=True'),
    (lambda T: torch.sum(T, []), r'sum of a sparse tensor over an empty list of dimensions'),
    (lambda T: T + T, r'add\.Tensor at add: \+ of a 3-D sparse tensor and another tensor \(2-D sparse only'),
    (lambda T: T * T.to_dense(), r'mul\.Tensor at mul: \* of a 3-D sparse tensor and another tensor'),
    (lambda T: torch.relu(torch.sum(T, 1)), r'relu\.default at relu: torch makes a torch\.sparse_coo result, the '
     r'translation a dense one'),
], ids=['keepdim', 'empty_dims', 'sparse_plus_sparse', 'sparse_times_dense', 'relu_of_a_sum'])
def test_untranslated_operations_raise_before_compiling(fn, message):
    with pytest.raises(ss.errors.UnsupportedOperationError, match=message):
        ss.torch.compile(fn, (coo((3, 4, 5), 90), ))


def test_inputs_that_are_not_translated():
    hybrid = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.ones(2, 3), (2, 2, 3))
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'a hybrid sparse COO tensor \(2 sparse and 1 dense'):
        ss.torch.compile(lambda T: T * 2.0, (hybrid, ))
    vector = torch.sparse_coo_tensor(torch.tensor([[0, 3]]), torch.ones(2), (5, ))
    with pytest.raises(ss.errors.UnsupportedOperationError, match=r'a sparse COO tensor of 1 dimension\(s\)'):
        ss.torch.compile(lambda v: v * 2.0, (vector, ))


def test_wrong_calls_raise_typed_errors(compiled_bmm):
    dt, compiled = compiled_bmm
    T, D = coo((3, 4, 5), 100, dt), dense((3, 5, 2), 101, dt)
    with pytest.raises(ss.errors.ShapeError, match=r'^t: 2-D, the model was compiled for 3-D'):
        compiled(coo((4, 5), 102, dt), D)
    with pytest.raises(ss.errors.ShapeError, match=r'^d: 2-D, the model was compiled for 3-D'):
        compiled(T, D[0])
    with pytest.raises(ss.errors.ShapeError, match=r'has shape \(2, 5, 2\), the program expects .* = 3'):
        compiled(T, dense((2, 5, 2), 103, dt))
    with pytest.raises(ss.errors.ArgumentError, match=r'^t: a dense tensor where the model was compiled for COO'):
        compiled(T.to_dense(), D)
    with pytest.raises(ss.errors.ArgumentError, match=r'^d: a COO tensor where the model was compiled for dense'):
        compiled(T, D.to_sparse_coo())
    hybrid = torch.sparse_coo_tensor(torch.tensor([[0, 2], [1, 0]]), torch.ones(2, 5, dtype=dt), (3, 4, 5))
    with pytest.raises(ss.errors.ShapeError, match=r'values have shape \(2, 5\): hybrid tensors .* not supported'):
        compiled(hybrid, D)
    other = torch.float64 if dt == torch.float32 else torch.float32
    with pytest.raises(ss.errors.DTypeError, match=rf'^t: dtype {other}, the model was compiled for {dt}'):
        compiled(T.to(other), D)
