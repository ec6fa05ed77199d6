"""The arrow decomposition of a graph matrix over ``p`` processes.

An *arrow matrix* of width ``b`` has its stored entries in the first ``b`` rows and
columns (the head) and in the band of ``b x b`` blocks on, above and below the diagonal.
Distributed by block rows (block ``k`` on process ``k``), its product moves at most the
head (``b`` words out to every process, ``b`` partial sums back) and the boundary entries
of the neighbouring blocks, whatever the graph. A graph matrix is split into a few such
matrices, each in its own vertex order (Gianinazzi et al., "Arrow matrix decomposition",
PPoPP 2024):

1. the remaining edges' graph gives a head (the vertices of highest remaining degree that
   exceed ``head_factor * max(p, mean degree)`` neighbours, at most ``b``) and an order of
   the other vertices that keeps neighbours close (reverse Cuthill-McKee; for level 0 also
   the matrix's own order and the spectral order, whichever moves fewest words);
2. an edge joins this level if it touches the head or its ends fall in the same or
   adjacent blocks of ``b`` vertices; the others are left for the next level; the last
   level keeps everything.

Level 0's order decides who owns ``x`` and ``y`` (block ``k`` of it on process ``k``,
the head spread over the processes); an entry of level ``l`` is multiplied by the owner of
its row's block in level ``l``'s order, a head row's entries by the owner of the column's
block (partial sums of the head rows travel, not whole rows). The decomposition is
symmetric in the pattern (``A + A.T``); entries of an unsymmetric matrix follow their edge.
"""
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import laplacian, reverse_cuthill_mckee
from scipy.sparse.linalg import lobpcg

from sdfgsparse.analysis.communication import Assignment, exchange_counts

__all__ = ['arrow_assignment', 'arrow_levels']


def _balanced(weights: np.ndarray, p: int) -> np.ndarray:
    cum = np.concatenate([[0], np.cumsum(weights, dtype=np.float64)])
    cuts = np.searchsorted(cum, cum[-1] * np.arange(p + 1) / p, side='left')
    cuts[0], cuts[-1] = 0, weights.size
    return np.maximum.accumulate(np.minimum(cuts, weights.size))


def _order(S: sp.csr_array, vertices: np.ndarray) -> np.ndarray:
    """``vertices`` in reverse Cuthill-McKee order of the subgraph of ``S`` they induce."""
    if vertices.size == 0:
        return vertices
    sub = sp.csr_array(S[vertices][:, vertices])
    return vertices[reverse_cuthill_mckee(sp.csr_matrix(sub), symmetric_mode=True)]


def _spectral(S: sp.csr_array, vertices: np.ndarray) -> np.ndarray:
    """``vertices`` sorted by the Fiedler vector of the graph Laplacian of the subgraph they
    induce (spectral bisection's order: contiguous blocks of it cut few edges of a mesh);
    a seeded LOBPCG, so every process computes the same order."""
    if vertices.size < 8:
        return vertices
    sub = sp.csr_matrix(S[vertices][:, vertices], dtype=np.float64)
    L = laplacian(sub)
    start = np.random.default_rng(0).standard_normal((vertices.size, 3))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # an approximate vector orders as well
        values, vectors = lobpcg(L, start, largest=False, tol=1e-4, maxiter=200)
    fiedler = vectors[:, np.argsort(values)[1]]
    return vertices[np.argsort(fiedler, kind='stable')]


#: Level 0's vertex orders tried (the one moving fewest words is kept); 'spectral' only up
#: to :data:`SPECTRAL_LIMIT` vertices.
ORDERS = ('rcm', 'own', 'spectral')
SPECTRAL_LIMIT = 1 << 20


def arrow_levels(A, p: int, width=None, head_factor: float = 4.0, max_levels: int = 4, order0: str = 'rcm'):
    """The decomposition of square ``A`` (scipy) for ``p`` processes: a list of levels,
    each ``(order, head, block_of, edge_mask)`` — ``order``: the level's vertices in their
    order (head first), ``head``: how many of them are the head, ``block_of`` (n,): each
    vertex's block in this level (-1 if absent), ``edge_mask``: which of the symmetric
    pattern's stored entries (canonical CSR of ``A + A.T`` without the diagonal) the level
    takes. ``width``: the block size ``b`` (default: blocks of about equal work);
    ``order0``: level 0's order ('rcm', 'own', 'spectral')."""
    A = sp.csr_array(A)
    n = A.shape[0]
    if A.shape[0] != A.shape[1]:
        raise ValueError(f'the arrow decomposition needs a square matrix, got {A.shape[0]}x{A.shape[1]}')
    S = sp.csr_array((A != 0).astype(np.int8))
    S = sp.csr_array(S + S.T)
    S.setdiag(0)
    S.eliminate_zeros()
    S.sum_duplicates()
    S.sort_indices()
    u = np.repeat(np.arange(n, dtype=np.int64), np.diff(S.indptr))
    v = S.indices.astype(np.int64)
    left = np.ones(u.size, bool)  # edges (both directions) not yet in a level
    levels = []
    for level in range(max(1, max_levels)):
        last = level == max(1, max_levels) - 1
        deg = np.bincount(u[left], minlength=n)
        present = np.flatnonzero(deg > 0) if level else np.arange(n)
        nl = present.size
        if level and nl == 0:
            break
        b = int(width) if width else max(1, -(-nl // p))
        mean = deg[present].mean() if nl else 0.0
        candidates = present[deg[present] > head_factor * max(p, mean)]
        head = candidates[np.argsort(-deg[candidates], kind='stable')][:b]
        is_head = np.zeros(n, bool)
        is_head[head] = True
        rest = present[~is_head[present]]
        Sl = sp.csr_array((np.ones(int(left.sum()), np.int8), (u[left], v[left])), shape=(n, n))
        if level == 0 and order0 == 'own':
            ordered = rest  # the matrix's own order (it may already keep neighbours close)
        elif level == 0 and order0 == 'spectral':
            ordered = _spectral(Sl, rest)
        else:
            ordered = _order(Sl, rest)
        order = np.concatenate([head, ordered]).astype(np.int64)
        block_of = np.full(n, -1, np.int64)
        if width:
            block_of[order] = np.minimum(np.arange(order.size) // b, p - 1)
        else:  # blocks of about equal work (the level's edges of each vertex, plus one)
            cuts = _balanced(deg[order] + 1, p)
            block_of[order] = np.searchsorted(cuts, np.arange(order.size), side='right') - 1
        if last:
            take = left.copy()
        else:
            near = np.abs(block_of[u] - block_of[v]) <= 1
            take = left & (is_head[u] | is_head[v] | near)
        levels.append((order, head.size, block_of, take))
        left &= ~take
        if not left.any():
            break
    return levels, (u, v)


def arrow_assignment(A, p: int, width=None, head_factor: float = 4.0, max_levels: int = 4) -> Assignment:
    """The arrow decomposition of square ``A`` as an
    :class:`~sdfgsparse.analysis.communication.Assignment` over ``p`` processes (see the
    module docstring; parameters as :func:`arrow_levels`). ``levels`` holds each stored
    entry's level. Level 0 is ordered by reverse Cuthill-McKee, in the matrix's own order
    and by the Fiedler vector (:data:`ORDERS`); the decomposition that moves the fewest
    words is kept."""
    A = sp.csr_array(A, copy=True)  # canonicalised: never the caller's arrays
    A.sum_duplicates()
    A.sort_indices()
    best = None
    for order0 in ORDERS:
        if order0 == 'spectral' and not (p > 1 and 8 <= A.shape[0] <= SPECTRAL_LIMIT):
            continue
        levels, edges = arrow_levels(A, p, width, head_factor, max_levels, order0)
        candidate = _assign(A, p, levels, edges)
        words = exchange_counts(A, candidate).total
        if best is None or words < best[0]:
            best = (words, candidate)
    return best[1]


def _assign(A: sp.csr_array, p: int, levels, edges) -> Assignment:
    n = A.shape[0]
    u, v = edges
    order0, nhead0, block0, _ = levels[0]
    # level 0 owns the vectors: block k on process k; the head (block 0 by position)
    # spread round-robin so that process 0 does not own every hub
    owner = block0.astype(np.int32)
    if nhead0:
        owner[order0[:nhead0]] = np.arange(nhead0) % p
    # each stored entry of A: its edge's level (diagonal entries: level 0)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(A.indptr))
    cols = A.indices.astype(np.int64)
    edge_level = np.full(u.size, len(levels) - 1, np.int64)
    for number, (_, _, _, take) in enumerate(levels):
        edge_level[take] = number
    key_edges = u * n + v
    key_entries = rows * n + cols
    where = np.searchsorted(key_edges, key_entries)
    off_diag = rows != cols
    entry_level = np.zeros(rows.size, np.int64)
    entry_level[off_diag] = edge_level[np.minimum(where[off_diag], max(u.size - 1, 0))]
    entry_rank = owner[rows].astype(np.int64)  # the row's owner: level 0, or a level left 1-D
    for number, (order, nhead, block_of, _) in enumerate(levels):
        at = entry_level == number
        if number == 0:
            blocks = owner
        else:  # the level's blocks to the processes that already own most of their vertices
            blocks = np.full(n, -1, np.int64)
            blocks[order] = _matched(block_of[order], owner[order], p)
        is_head = np.zeros(n, bool)
        is_head[order[:nhead]] = True
        r, c = rows[at], cols[at]
        rank = np.clip(np.where(is_head[r] & ~is_head[c], blocks[c], blocks[r]), 0, p - 1)
        if number == 0:
            entry_rank[at] = rank
            continue
        # keep the level as an arrow only where that moves fewer words than leaving its
        # entries with their rows' owners (the partition's own count decides)
        trial = entry_rank.copy()
        trial[at] = rank
        as_arrow = exchange_counts(A, Assignment(p, owner, owner, trial.astype(np.int32))).total
        as_rows = exchange_counts(A, Assignment(p, owner, owner, entry_rank.astype(np.int32))).total
        if as_arrow < as_rows:
            entry_rank = trial
        else:
            entry_level[at] = 0
    return Assignment(p, owner, owner, entry_rank.astype(np.int32), 'arrow', levels=entry_level.astype(np.int8))


def _matched(block: np.ndarray, owner: np.ndarray, p: int) -> np.ndarray:
    """``block`` relabelled so that block ``b`` goes to the process owning most of its
    vertices (a maximum-weight matching of blocks to processes)."""
    overlap = np.zeros((p, p), np.int64)
    np.add.at(overlap, (block, owner), 1)
    blocks, ranks = linear_sum_assignment(overlap, maximize=True)
    relabel = np.empty(p, np.int64)
    relabel[blocks] = ranks
    return relabel[block]
