"""Longformer-style sparse attention written in PyTorch (``torch.sparse.sampled_addmm``,
``torch.sparse.softmax``, ``torch.sparse.mm``), compiled with ``ss.torch.compile``: each
layer's sampled scores, softmax and product become one fused ``SparseAttention`` node
that never stores the scores. One compile serves every sequence length.

    python samples/attention_torch.py [SEQ ...]    (needs torch: pip install torch==2.13.0)
"""
import sys
import time

import numpy as np
import torch

import sdfgsparse as ss
from sdfgsparse.bench.ml import attention_class, window_mask


def as_torch(M):
    return torch.sparse_csr_tensor(torch.from_numpy(M.indptr.astype(np.int64)),
                                   torch.from_numpy(M.indices.astype(np.int64)), torch.from_numpy(M.data), M.shape,
                                   check_invariants=True)


def main(seqs=(512, 1024), d=64, layers=4, window=64, n_global=8):
    torch.manual_seed(0)
    model = attention_class(torch)(d, layers).eval()
    compiled, rows = None, []
    for n in seqs:
        S, x = as_torch(window_mask(n, window, n_global)), torch.randn(n, d)
        if compiled is None:
            t0 = time.perf_counter()
            compiled = ss.torch.compile(model, (x, S))
            rows.append(('attention-torch', f'compiled in {time.perf_counter() - t0:.1f} s',
                         compiled.report().splitlines()[0].split(': ', 1)[1]))
        with torch.no_grad():
            err = (compiled(x, S) - model(x, S)).abs().max().item()
        rows.append(('attention-torch', f'seq {n}', f'{S._nnz()} stored scores per layer',
                     f'max |compiled - eager| {err:.1e}'))
    return rows


if __name__ == '__main__':
    for r in main(tuple(int(a) for a in sys.argv[1:]) or (512, 1024)):
        print(*r)
