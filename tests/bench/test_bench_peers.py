"""Every peer adapter against the scipy reference, on a tiny square matrix with empty
rows and a rectangular one; peers that are not installed are skipped."""
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from sdfgsparse.bench.kernels import KERNELS, Kernel, check_result
from sdfgsparse.bench.matrices import canonical
from sdfgsparse.bench.peers import PEER_NAMES, make_peers

KERNELS_SMALL = [Kernel(n, 5 if KERNELS[n][0] else None) for n in KERNELS]

# what each peer has (None: the adapter returns no call for the kernel)
MISSING = {'pydata': {'sddmm'}, 'mkl': {'sddmm', 'add'}}


def _matrix(m, n, seed):
    A = sp.random_array((m, n), density=0.2, format='lil', rng=np.random.default_rng(seed))
    A[0, :] = 0
    A[3, :] = 0
    return canonical(A)


MATRICES = {'square': _matrix(24, 24, 1), 'rect': _matrix(18, 11, 2)}


@pytest.fixture(scope='module', params=PEER_NAMES)
def peer(request):
    p = make_peers([request.param])[0]
    why = p.available()
    if why:
        pytest.skip(f'{request.param}: {why}')
    p.setup(1)
    assert p.version()
    return p


@pytest.mark.parametrize('kernel', KERNELS_SMALL, ids=lambda k: k.label)
@pytest.mark.parametrize('matrix', list(MATRICES))
def test_peer_agrees_with_scipy(peer, kernel, matrix):
    A = MATRICES[matrix]
    if kernel.skip_reason(A, 1 << 30):
        pytest.skip(kernel.skip_reason(A, 1 << 30))
    inp = kernel.inputs(A, seed=4)
    fn = peer.prepare(kernel, inp)
    if kernel.name in MISSING.get(peer.name, ()):
        assert fn is None
        return
    assert fn is not None
    ok, detail = check_result(peer.to_host(fn()), kernel.reference(inp), kernel.dtype)
    assert ok, detail
    ok, detail = check_result(peer.to_host(fn()), kernel.reference(inp), kernel.dtype)  # callable twice
    assert ok, detail


def test_unavailable_peer_message_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, 'graphblas', None)  # makes the import fail
    why = make_peers(['graphblas'])[0].available()
    assert why.startswith("not installed (pip install python-graphblas, or all peers: pip install -e '.[bench]')")
