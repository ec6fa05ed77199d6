"""The torch frontend's SDFG builder (frontends/torch_sdfg.py): every operation of its
vocabulary, on the edge cases of composing them (a value read twice, a result that is an
input or another result, numbers on either side, NaN and inf constants, sparse results,
SpGEMM capacities), each compiled model against eager torch; the build is the same SDFG
in every process; nothing of it is program text that runs."""
import json
import os
import subprocess
import sys

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss

torch = pytest.importorskip('torch')
from sdfgsparse.frontends import torch_sdfg  # noqa: E402 (needs torch)

pytestmark = [pytest.mark.filterwarnings('ignore::UserWarning'), pytest.mark.xdist_group('torch_frontend')]

F = torch.nn.functional


def _csr(m, n, seed, density=0.4, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    D = torch.randn(m, n, generator=g, dtype=dtype)
    D[torch.rand(m, n, generator=g) > density] = 0
    return D.to_sparse_csr()


def _dense(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _coo(*shape, seed=0, density=0.4, dtype=torch.float64):
    D = _dense(*shape, seed=seed, dtype=dtype)
    D[torch.rand(*shape, generator=torch.Generator().manual_seed(seed + 1)) > density] = 0
    return D.to_sparse_coo()


#: name -> (function, example inputs, the forms its SDFG must be built from)
CASES = {
    'dense_linear': (lambda x, w, b: F.linear(x, w, b), (_dense(5, 4), _dense(3, 4, seed=1), _dense(3, seed=2)),
                     {'matmul', 'transpose', '+'}),
    'addmm_scaled': (lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0),
                     (_dense(5, 3), _dense(5, 4, seed=1), _dense(4, 3, seed=2)), {'matmul', '*_num', '+'}),
    'numbers_both_sides': (lambda x: torch.div(x, 3.0) + torch.mul(x, 2) - 1.5 + torch.add(x, x, alpha=0.5),
                           (_dense(4, 3), ), {'/_num', '*_num', '-_num', '+'}),
    'tensor_over_tensor': (lambda x, y: x / y * torch.sub(x, 1, alpha=2) - y,
                           (_dense(4, 3), _dense(4, 3, seed=1).abs() + 1), {'/', '*', '-_num', '-'}),
    'nan_and_inf': (lambda x: (x * float('inf'), x + float('nan'), x - float('-inf')), (_dense(3, 3), ),
                    {'*_num', '+_num', '-_num'}),
    'unary_dense': (lambda x: torch.relu(x) + torch.sigmoid(x) + torch.tanh(x) + torch.exp(x) - torch.neg(x),
                    (_dense(6, 2), ), {'relu', 'sigmoid', 'tanh', 'exp', 'neg'}),
    'unary_sparse': (lambda A: (torch.relu(A), torch.tanh(A)), (_csr(6, 5, 1), ), {'sparse_relu', 'sparse_tanh'}),
    'sparse_read_twice': (lambda A: (A + A, A * A, A * 2.0), (_csr(5, 5, 2), ), {'+', '*', '*_num', 'copy'}),
    'sparse_mask_and_sum': (lambda A, B, X: (A * X, A + B), (_csr(4, 6, 3), _csr(4, 6, 4), _dense(4, 6)),
                            {'*', '+'}),
    'sparse_transpose_product': (lambda A, x: (A.t() @ x, A.t()), (_csr(5, 3, 5), _dense(5, 2)),
                                 {'sparse_transpose', 'matmul'}),
    'spgemm': (lambda A, B: torch.sparse.mm(A, B), (_csr(6, 5, 6), _csr(5, 4, 7)), {'matmul'}),
    'permute_reshape': (lambda x: (x.permute(2, 0, 1).reshape(-1, 4), x.view(6, 4)), (_dense(2, 3, 4), ),
                        {'permute', 'reshape'}),
    'reductions': (lambda x: (x.sum(), x.mean(), x.sum(dim=1, keepdim=True), x.mean(dim=0)), (_dense(5, 3), ),
                   {'sum', 'mean', 'sum_axis', 'mean_axis', 'reshape'}),
    'softmaxes': (lambda x: (torch.softmax(x, dim=0), torch.log_softmax(x, dim=1)), (_dense(4, 7), ), {'softmax'}),
    'layer_norm_plain': (lambda x: F.layer_norm(x, (6, )), (_dense(3, 6), ), {'normalize'}),
    'gelu_ranks': (lambda v, x: (F.gelu(v), F.gelu(x), F.gelu(x, approximate='tanh')), (_dense(7), _dense(2, 3, 4)),
                   {'gelu', 'gelu_tanh'}),
    'conversions': (lambda A, B: (A.to_sparse_csc(), B.to_sparse_csr()), (_csr(4, 5, 8), _csr(5, 4, 9).to_sparse_csc()),
                    {'to_csc', 'to_csr'}),
    'results_that_are_values': (lambda x: (x.clone(), x.detach(), x * 2, (x * 2).clone()), (_dense(3, 2), ),
                                {'copy', '*_num'}),
    'sampled': (lambda S, q, k: torch.sparse.sampled_addmm(S, q, k.T, beta=0.5, alpha=2.0),
                (_csr(5, 5, 10), _dense(5, 3), _dense(5, 3, seed=1)), {'spones', 'sddmm', '*_num', '+'}),
    'sparse_softmax': (lambda S: torch.sparse.softmax(S.to_sparse_coo(), 1), (_csr(5, 5, 11), ), {'sparse_softmax'}),
    'sparse_tensor': (lambda T, D: (torch.bmm(T, D), (T * 2.0).to_dense(), torch.sum(T, 1)),
                      (_coo(3, 4, 5, seed=12), _dense(3, 5, 2)), {'einsum', 'einsum_1', 'permute', 'sparse_sum_axis'}),
}


def _forms(monkeypatch):
    used = set()
    call = torch_sdfg.Builder.call

    def spy(self, form, *args, **kwargs):
        used.add(form)
        return call(self, form, *args, **kwargs)

    monkeypatch.setattr(torch_sdfg.Builder, 'call', spy)
    return used


def _same(got, want, name):
    got = got if isinstance(got, tuple) else (got, )
    want = want if isinstance(want, tuple) else (want, )
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.layout == w.layout, f'{name} result {k}: {g.layout}, torch {w.layout}'
        g = g.to_dense() if g.layout != torch.strided else g
        w = w.to_dense() if w.layout != torch.strided else w
        torch.testing.assert_close(g, w, equal_nan=True, msg=f'{name} result {k}')


@pytest.mark.parametrize('name', sorted(CASES))
def test_operation_matches_eager(name, monkeypatch):
    fn, inputs, forms = CASES[name]
    used = _forms(monkeypatch)
    compiled = ss.torch.compile(fn, inputs)
    assert compiled.graph_breaks() == [], compiled.graph_breaks()
    assert forms <= used, f'{name}: built from {sorted(used)}, expected {sorted(forms)} among them'
    before = [t.clone() if t.layout == torch.strided else t.to_dense() for t in inputs]
    with torch.no_grad():
        _same(compiled(*inputs), fn(*inputs), name)
    for t, b in zip(inputs, before):  # nothing the caller passed is written
        torch.testing.assert_close(t if t.layout == torch.strided else t.to_dense(), b)


#: Forms torch.export (2.13) makes no graph for (element-wise exp and sigmoid, sums along an
#: axis of a CSR tensor): built directly, against scipy.
BUILT = {
    'sparse_exp': (lambda A: sp.csr_array((np.exp(A.data), A.indices, A.indptr), shape=A.shape), None),
    'sparse_sigmoid': (lambda A: (1 / (1 + np.exp(-A.toarray()))) * (A.toarray() != 0), None),
    'sparse_sum_axis': (lambda A: np.asarray(A.sum(axis=0)).ravel(), {'axis': 0}),
}


def test_every_form_has_a_case():
    covered = set().union(*(forms for _, _, forms in CASES.values())) | set(BUILT)
    assert covered == set(torch_sdfg.FORMS), sorted(set(torch_sdfg.FORMS) ^ covered)


@pytest.mark.parametrize('form', sorted(BUILT))
def test_form_built_directly_matches_scipy(form):
    want, params = BUILT[form]
    A = sp.random_array((6, 5), density=0.4, format='csr', rng=3)
    A.data -= 0.5
    b = torch_sdfg.Builder(f'direct_{form}')
    rows, cols = dace.symbol('R'), dace.symbol('C')
    b.add_input('t_a', ss.CSR.type(dace.float64, rows, cols, n1='N_a').structure())
    b.call(form, ['t_a'], params or {}, '__return', output=True)
    got = ss.compile(b.finish())(A)
    got = got.toarray() if hasattr(got, 'toarray') else got
    ref = want(A)
    np.testing.assert_allclose(got, ref.toarray() if hasattr(ref, 'toarray') else ref, rtol=1e-12)


def test_spgemm_capacity_names_the_segment_inputs():
    A, B = _csr(6, 5, 6), _csr(5, 4, 7)
    compiled = ss.torch.compile(lambda A, B: torch.sparse.mm(A, B), (A, B))
    caps = [s for s in compiled.sdfg.free_symbols if str(s).startswith('sscap')]
    assert len(caps) == 1 and str(caps[0]).split('__')[1::2] == ['t_args_0', 't_args_1'], caps
    for seed in (1, 2):  # other patterns: the capacity is computed per call
        A2, B2 = _csr(6, 5, 20 + seed, 0.8), _csr(5, 4, 30 + seed, 0.8)
        _same(compiled(A2, B2), torch.sparse.mm(A2, B2), 'spgemm')


def test_a_value_read_twice_in_one_operation():
    x = _dense(4, 4)
    compiled = ss.torch.compile(lambda x: x * x + x @ x, (x, ))
    torch.testing.assert_close(compiled(x), x * x + x @ x)


def test_listing_names_values_and_is_not_a_program():
    A, x = _csr(5, 5, 1), _dense(5, 2)
    compiled = ss.torch.compile(lambda A, x: torch.relu(torch.sparse.mm(A, x)) * 2.0, (A, x))
    src = compiled.source
    assert src.startswith('# the operations of SDFG') and 'nothing runs it' in src
    assert 't_args_0: ss.CSR[dace.float64, S0, S2, dace.int64], t_args_1: dace.float64[S2, S3]' in src
    assert 't__sparse_mm = t_args_0 @ t_args_1' in src and 't_relu = np.maximum(t__sparse_mm, 0)' in src
    assert 't_mul = t_relu * 2.0' in src and 'return t_mul' in src


_DETERMINISM = r'''
import json, sys, warnings
warnings.simplefilter('ignore')
import torch
import sdfgsparse as ss
from sdfgsparse.build import content_hash
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(12, 8), torch.nn.ReLU(), torch.nn.Linear(8, 12), torch.nn.Tanh())
model = ss.torch.sparsify(model, 0.5).eval()
compiled = ss.torch.compile(model, (torch.randn(3, 12), ))
print(json.dumps(content_hash(compiled.sdfg)))
'''


def test_one_sdfg_in_every_process(tmp_path):
    """The same model builds the same SDFG (one build folder) whatever Python's string
    hashing: DaCe's simplification orders edges by set iteration."""
    hashes = set()
    for seed in ('1', '2'):
        env = dict(os.environ, PYTHONHASHSEED=seed, DACE_default_build_folder=str(tmp_path / '.dacecache'))
        out = subprocess.run([sys.executable, '-c', _DETERMINISM], capture_output=True, text=True, env=env,
                             cwd=tmp_path, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        hashes.add(json.loads(out.stdout.strip().splitlines()[-1]))
    assert len(hashes) == 1, hashes
