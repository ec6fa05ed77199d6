"""A 2-layer GCN written in PyTorch, compiled with ``ss.torch.compile`` and trained with
torch's Adam: inference runs as one SDFG, training through sdfgsparse's sparse operators.

    python samples/gcn_torch.py [MATRIX_DIR]    (needs torch: pip install torch==2.13.0)
"""
import copy
import sys
import time

import numpy as np
import scipy.sparse as sp
import torch

import sdfgsparse as ss
from _common import load, matrices


class GCN(torch.nn.Module):

    def __init__(self, features, hidden, classes):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(features, hidden), torch.nn.Linear(hidden, classes)

    def forward(self, A, X):
        h = torch.relu(torch.sparse.mm(A, self.l1(X)))
        return torch.log_softmax(torch.sparse.mm(A, self.l2(h)), dim=1)


def normalized(A):
    """GCN's propagation matrix D^-1/2 (|A| + I) D^-1/2 (Kipf & Welling), float32."""
    A = abs(A) + sp.eye_array(A.shape[0], dtype=A.dtype, format='csr')
    d = np.asarray(A.sum(axis=1)).ravel() ** -0.5
    return sp.csr_array(sp.diags_array(d) @ A @ sp.diags_array(d), dtype=np.float32)


def as_torch(A):
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                   torch.from_numpy(A.indices.astype(np.int64)), torch.from_numpy(A.data), A.shape)


def main(folder=None, features=64, hidden=16, classes=7, epochs=20):
    rows = []
    for name, path in matrices(folder):
        A = load(path, np.float32)
        if A.shape[0] != A.shape[1]:
            continue
        A = normalized(A)
        torch.manual_seed(0)
        At, X = as_torch(A), torch.randn(A.shape[0], features)
        labels = torch.randint(0, classes, (A.shape[0], ))
        eager = GCN(features, hidden, classes)
        t0 = time.perf_counter()
        model = ss.torch.compile(copy.deepcopy(eager), (At, X))
        compile_s = time.perf_counter() - t0
        opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in (eager, model)]
        for _ in range(epochs):  # the same training, eager and compiled
            for m, opt in zip((eager, model), opts):
                opt.zero_grad()
                torch.nn.functional.nll_loss(m(At, X), labels).backward()
                opt.step()
        with torch.no_grad():
            err = (model(At, X) - eager(At, X)).abs().max().item()
        rows.append(('gcn-torch', name, f'compile {compile_s:.1f} s', f'max |compiled - eager| {err:.1e} after '
                     f'{epochs} Adam steps', f'{model.calls["autograd"]} training calls'))
    return rows


if __name__ == '__main__':
    for r in main(sys.argv[1] if len(sys.argv) > 1 else None):
        print(*r)
