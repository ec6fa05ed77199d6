"""The data movement of the schedules ``ss.optimize`` chooses between, from one model.

A transformation that trades one schedule of a node for another (tiles of SpMM's dense
loop, sampled attention fused into one pass or run as three nodes, an epilogue fused into
its product) asks this module what each candidate moves per call, and rewrites only when
its candidate moves at least :data:`MARGIN` less than the schedule the program runs
without it: a rewrite the model cannot justify is not applied. The node's SOAP lower bound
(:mod:`~sdfgsparse.analysis.sparse_models`) is reported beside the candidates.

Two levels of the memory hierarchy count:

* memory <-> last-level cache (``llc`` bytes, shared by the threads), at the machine's
  STREAM bandwidth;
* last-level cache <-> a core's private cache (``l2`` bytes per core), about
  :data:`LLC_SPEEDUP` times faster.

A candidate's cost is ``memory bytes + private-cache misses in bytes / LLC_SPEEDUP``, in
memory-equivalent bytes; for a program whose data stay in the last-level cache between
calls, the second term decides. Streams (stored entries, row pointers, dense rows read or
written in order) are counted once per pass at the level that holds their array.
Gathers of dense rows at column indices (SpMM's ``B``, attention's ``K`` and ``V``) are
counted as misses of an LRU cache over the column pattern, one dense row per line
(:func:`row_misses`, the simulator of :mod:`~sdfgsparse.analysis.spmv_traffic`), or, when
no pattern is given, as the fraction of the rows that does not fit.

Two work terms join the bytes, both counted in the same memory-equivalent bytes: each
visit of a stored entry in a pass (:data:`ENTRY_VISIT`: loop control, index loads, the
latency of its update; a tile that walks ``A`` once more pays it for every entry), and
each parallel region (:data:`PARALLEL_PASS`: its fork and join; a kernel or a pass more).

``LLC_SPEEDUP``, ``ENTRY_VISIT`` and ``PARALLEL_PASS`` are assumptions (Zen 4 and recent
Xeons read their L3 at 3-5 times a 2-core share of DRAM bandwidth; a visit takes a few
nanoseconds, a fork and join one or two microseconds), not measurements of this machine;
``tests/analysis/test_schedules.py`` checks the decisions they lead to on hand-made cases
and ``docs/performance.md`` the measured effect of the decisions on real matrices.
"""
import math
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from sdfgsparse.analysis import sparse_models as sm
from sdfgsparse.analysis.spmv_traffic import x_line_misses
from sdfgsparse.analysis.tiling import machine_cache_bytes, machine_threads

__all__ = ['MARGIN', 'LLC_SPEEDUP', 'ENTRY_VISIT', 'PARALLEL_PASS', 'Machine', 'Candidate', 'Decision', 'row_misses',
           'spmm_tile_cost', 'spmm_tile_decision', 'attention_decision', 'epilogue_decision', 'product_cost',
           'bound_bytes', 'spmm_bound_bytes', 'attention_bound_bytes']

#: the least relative saving that justifies a rewrite (below it, the measured differences
#: between schedules were noise or went the other way)
MARGIN = 0.10
#: how much faster the last-level cache feeds a core than memory does (see the module)
LLC_SPEEDUP = 4.0
#: the fork and join of one parallel region (a kernel, or a pass inside one), in
#: memory-equivalent bytes: about 1.5 us at 40 GB/s
PARALLEL_PASS = 64 << 10
#: the work of visiting one stored entry in one pass (loop control, index loads, the
#: latency of its update), in memory-equivalent bytes: about 1.5 ns at 40 GB/s
ENTRY_VISIT = 64
_WAYS = 16
#: accesses the LRU simulation of a gather follows at most (about; set sampling): it
#: keeps a decision within ss.optimize's heuristics budget (tens of milliseconds)
SIMULATED = 1 << 11
#: longer gather streams are simulated over a window of this many accesses from their
#: middle (when the rows do not fit), the misses scaled to the whole stream
WINDOW = 1 << 16


@dataclass(frozen=True)
class Machine:
    """The cache sizes and thread count the model uses."""
    llc: int
    l2: int
    threads: int

    @classmethod
    def here(cls, llc: Optional[int] = None, threads: Optional[int] = None) -> 'Machine':
        """This machine (Linux sysfs; ``llc`` and ``threads`` override)."""
        l2 = machine_cache_bytes(2)
        l3 = machine_cache_bytes(3)
        last = llc if llc else (l3 if l3 > l2 else l2)
        return cls(int(last), int(min(l2, last)), int(threads or machine_threads()))


@dataclass
class Candidate:
    """One schedule: its name, memory bytes, private-cache miss bytes and cost; ``param``:
    the value a transformation sets for it (a tile size)."""
    name: str
    memory: float
    private: float
    param: int = 0

    @property
    def cost(self) -> float:
        return self.memory + self.private / LLC_SPEEDUP

    def __str__(self):
        return f'{self.name} {_mb(self.cost)} (memory {_mb(self.memory)}, last-level cache {_mb(self.private)})'


@dataclass
class Decision:
    """The model's verdict on one node: every candidate, the default (what runs without
    the rewrite), the chosen one, and the node's lower bound in bytes (None if unknown)."""
    node: str
    transformation: str
    candidates: List[Candidate]
    default: str
    chosen: str
    bound: Optional[float] = None
    notes: List[str] = field(default_factory=list)

    def candidate(self, name: str) -> Candidate:
        return next(c for c in self.candidates if c.name == name)

    @property
    def applies(self) -> bool:
        return self.chosen != self.default

    @property
    def saving(self) -> float:
        """Relative cost saved by the chosen candidate against the default."""
        d = self.candidate(self.default).cost
        return 0.0 if d <= 0 else 1.0 - self.candidate(self.chosen).cost / d

    def line(self) -> str:
        """``node: bound X; chosen <name> Y (default); rejected: ...`` (memory-equivalent MB)."""
        chosen = self.candidate(self.chosen)
        rejected = [str(c) for c in self.candidates if c.name != self.chosen]
        bound = f'SOAP lower bound {_mb(self.bound)} (cold caches); ' if self.bound is not None else ''
        tag = ' (default)' if not self.applies else f' ({self.saving:.0%} below the default)'
        text = f'{self.node}: {bound}chosen {chosen}{tag}'
        if rejected:
            text += '; rejected: ' + ', '.join(rejected)
        return text + ''.join(f'; {n}' for n in self.notes)

    def to_dict(self) -> dict:
        return {'node': self.node, 'transformation': self.transformation, 'default': self.default,
                'chosen': self.chosen, 'bound_bytes': self.bound,
                'candidates': {c.name: {'memory': c.memory, 'private': c.private, 'cost': c.cost}
                               for c in self.candidates}}


def _mb(b: Optional[float]) -> str:
    return '?' if b is None else f'{b / 1e6:.3g} MB'


def _choose(node: str, transformation: str, candidates: Sequence[Candidate], default: str,
            bound: Optional[float] = None, margin: float = MARGIN) -> Decision:
    """The cheapest candidate, unless it saves less than ``margin`` of the default's cost."""
    cands = list(candidates)
    best = min(cands, key=lambda c: (c.cost, c.name != default))
    base = next(c for c in cands if c.name == default)
    chosen = best.name if best.cost <= (1.0 - margin) * base.cost else default
    return Decision(node, transformation, cands, default, chosen, bound)


def row_misses(indices: Optional[np.ndarray], n_rows: int, row_bytes: int, cache_bytes: int,
               accesses: Optional[int] = None) -> float:
    """Dense rows (``row_bytes`` each, ``n_rows`` of them) fetched by gathering
    ``rows[indices[q]]`` in order through an LRU cache of ``cache_bytes``.

    With ``indices``: the LRU simulation of :func:`~sdfgsparse.analysis.spmv_traffic.
    x_line_misses` with one row per line (set-sampled when the rows do not fit). Without
    (``accesses`` gathers of an unknown pattern): every row once, plus the other accesses
    scaled by the fraction of the rows that does not fit."""
    row_bytes = max(1, int(row_bytes))
    if indices is not None:
        if len(indices) == 0:
            return 0.0
        if cache_bytes < row_bytes:  # not even one row stays
            return float(len(indices))
        ways = max(1, min(_WAYS, cache_bytes // row_bytes))
        sets = max(1, cache_bytes // (row_bytes * ways))
        scale = 1.0
        if len(indices) > WINDOW and n_rows * row_bytes > cache_bytes:  # a window of the stream, scaled
            mid = (len(indices) - WINDOW) // 2
            scale, indices = len(indices) / WINDOW, indices[mid:mid + WINDOW]
        # simulate about SIMULATED accesses: every set when that is few, else a sample of sets
        sample = max(1, min(sets, int(sets * SIMULATED / len(indices))))
        misses, _, _ = x_line_misses(indices, n_rows, row_bytes, cache_bytes, line=row_bytes, ways=ways,
                                     sample_sets=sample)
        return float(misses) * scale
    n = float(accesses or 0)
    first = min(float(n_rows), n)
    resident = min(1.0, cache_bytes / max(1.0, n_rows * row_bytes))
    return first + (n - first) * (1.0 - resident)


def _fits(nbytes: float, cache: float) -> bool:
    return nbytes <= cache


# ---------------------------------------------------------------------------- SpMM tiles
def spmm_tile_cost(rows: int, cols: int, nnz: int, k: int, tile: int, scatter: bool, m: Machine, v: int = 8,
                   i: int = 4) -> Candidate:
    """Cost of SpMM ``Y (rows x k) = A @ B`` with the dense loop in tiles of ``tile``
    columns (``tile >= k``: one walk). Each tile walks A's entries once (scatter walks:
    two coordinates and a value per entry; row-owned: an index and a value, plus the row
    pointers). The dense operands move once when a tile's working set stays cached (row-
    owned: ``B[:, tile]``, shared by the threads; scatter: ``B[:, tile]`` and ``Y[:, tile]``
    per thread), otherwise each entry's gather (and, scattering, its update of Y) misses
    by the fraction that does not fit."""
    J = max(1, min(tile, k))
    walks = math.ceil(k / J)
    a_walk = nnz * (v + 2 * i) if scatter else nnz * (v + i) + (rows + 1) * i
    dense_once = (rows + cols) * k * v + rows * k * v  # B read, Y zeroed and written
    per_entry = (3 if scatter else 1) * nnz * k * v  # a piece of a B row (+ Y's read and write)
    ws_private = (rows + cols) * J * v if scatter else cols * J * v  # one thread's tile
    ws_shared = ws_private * m.threads if scatter else ws_private  # B's slice is shared

    def missing(cache, ws):
        return 1.0 - min(1.0, cache / max(1.0, ws))

    if _fits(nnz * (v + i) + (rows + 1) * i + (rows + cols) * k * v, m.llc):
        memory = 0.0  # everything stays in the last-level cache between calls
    else:
        a_mem = a_walk if _fits(a_walk + ws_shared, m.llc) else walks * a_walk
        memory = a_mem + dense_once + per_entry * missing(m.llc, ws_shared)
    private = walks * a_walk + dense_once + per_entry * missing(m.l2, ws_private) + \
        walks * nnz * ENTRY_VISIT * LLC_SPEEDUP
    # a scatter walk runs its tiles in one parallel region, a row-owned one a region per tile
    memory += PARALLEL_PASS * (1 if scatter else walks)
    name = 'one walk' if J >= k else f'tile {J}'
    return Candidate(name, memory, private, J)


def spmm_tile_decision(node: str, rows: int, cols: int, nnz: int, k: int, scatter: bool, default_tile: int,
                       m: Machine, v: int = 8, i: int = 4, vector: int = 8,
                       bound: Optional[float] = None) -> Decision:
    """Tile of SpMM's dense loop: the candidates are the default (``default_tile``; 0:
    one walk) and ``vector`` times powers of two up to ``k`` (scatter walks, whose tiles
    are their parallel units: up to ``ceil(k / (2 threads))`` with several threads)."""
    default = spmm_tile_cost(rows, cols, nnz, k, default_tile or k, scatter, m, v, i)
    cands = {default.name: default}
    cap = k if not scatter or m.threads <= 1 else max(vector, math.ceil(k / (2 * m.threads)))
    J = vector
    while J < cap:
        c = spmm_tile_cost(rows, cols, nnz, k, J, scatter, m, v, i)
        cands.setdefault(c.name, c)
        J *= 2
    c = spmm_tile_cost(rows, cols, nnz, k, cap, scatter, m, v, i)
    cands.setdefault(c.name, c)
    return _choose(node, 'SparseDenseTiling', list(cands.values()), default.name, bound)


# ---------------------------------------------------------------------------- attention
def attention_decision(node: str, rows: int, cols: int, nnz: int, d: int, e: int, m: Machine, v: int = 8,
                       i: int = 4, indices: Optional[np.ndarray] = None, row_owning: bool = True,
                       keys_transposed: bool = False, bound: Optional[float] = None) -> Decision:
    """Sampled attention ``softmax(S * (Q @ K.T)) @ V`` fused into one node (each row of S
    gathers its K and V rows together; a format that does not own its rows computes the
    scores twice) or run as SDDMM, softmax and SpMM (each gathers one matrix, but the
    scores and weights, a sparse matrix of S's pattern each, are written and read back).
    ``indices``: S's column indices in row order (CSR), for the gather model.
    ``keys_transposed``: the SDDMM reads ``K.T`` (a transposed copy of ``K``, ``d x cols``)
    by columns, a cache line per element (the fused node reads ``K`` by rows)."""
    s_stream = nnz * (v + i) + (rows + 1) * i
    inter = nnz * (v + i) + (rows + 1) * i  # one sampled matrix (values and index copies)
    q_out = rows * (d + e) * v

    memo: Dict[tuple, float] = {}

    def gathers(row_bytes, cache):
        if (row_bytes, cache) not in memo:
            memo[row_bytes, cache] = row_misses(indices, cols, row_bytes, cache, accesses=nnz) * row_bytes
        return memo[row_bytes, cache]

    per_line = max(1, 64 // v)

    def key_gathers(cache):  # the unfused SDDMM's reads of K
        if not keys_transposed:
            return gathers(d * v, cache)
        lines = None if indices is None else np.asarray(indices, dtype=np.int64) // per_line
        return row_misses(lines, -(-cols // per_line), d * 64, cache, accesses=nnz) * d * 64

    transpose = 2 * cols * d * v if keys_transposed else 0  # K.T written and read back

    passes = 1 if row_owning else 2

    def fused_at(cache):  # S's stream(s), Q and the output, K and V rows gathered together
        return passes * s_stream + q_out + gathers((d + e) * v, cache) + \
            (0 if row_owning else gathers(d * v, cache))

    def three_at(cache):  # S read by SDDMM and SpMM, K and V gathered by each
        return 2 * s_stream + q_out + key_gathers(cache) + gathers(e * v, cache)

    # entry visits: fused, the score pass and the weighted row (per row, the weights'
    # exp and scaling on scratch slots in L1: one more); three nodes, SDDMM, the
    # softmax's three passes (maximum, exp and sum, scaling) and SpMM
    visits = (3 if row_owning else 4, 5)
    fused_p = fused_at(m.l2) + visits[0] * nnz * ENTRY_VISIT * LLC_SPEEDUP
    sep_p = three_at(m.l2) + 4 * inter + transpose + visits[1] * nnz * ENTRY_VISIT * LLC_SPEEDUP
    everything = s_stream + q_out + cols * (d + e) * v + 2 * inter
    if _fits(everything, m.llc):
        fused_m = sep_m = 0.0
    else:
        fused_m = fused_at(m.llc)
        sep_m = three_at(m.llc) + (4 * inter if not _fits(2 * inter, m.llc) else 0.0) + \
            (transpose if not _fits(transpose, m.llc) else 0.0)
    fused_m += PARALLEL_PASS
    sep_m += 5 * PARALLEL_PASS  # the transpose, SDDMM, the softmax's passes and SpMM
    cands = [Candidate('fused', fused_m, fused_p), Candidate('three nodes', sep_m, sep_p)]
    dec = _choose(node, 'SparseFusion', cands, 'three nodes', bound)
    if indices is None:
        dec.notes.append('gathers modelled without the pattern (no example matrix)')
    return dec


# ---------------------------------------------------------------------------- epilogues
def epilogue_decision(node: str, product: Candidate, rows: int, k: int, m: Machine, v: int = 8,
                      extra_inputs: int = 0, bound: Optional[float] = None) -> Decision:
    """An element-wise epilogue on the ``rows x k`` result of a product (``product``: the
    product's own cost): fused, the product writes the epilogue's output directly; separate,
    it writes an intermediate that a second pass reads back (with ``extra_inputs`` vectors
    of ``k`` elements) and writes the output."""
    out = rows * k * v
    resident = _fits(2 * out, m.llc)
    sep = Candidate('separate pass', product.memory + (0.0 if resident else 2 * out) + PARALLEL_PASS,
                    product.private + 2 * out + extra_inputs * k * v)
    fused = Candidate('fused', product.memory, product.private)
    return _choose(node, 'SparseEpilogueFusion', [fused, sep], 'separate pass', bound)


def product_cost(rows: int, cols: int, nnz: int, k: int, m: Machine, v: int = 8, i: int = 4) -> Candidate:
    """A row-owned SpMV (``k = 1``) or SpMM, untiled (for :func:`epilogue_decision`)."""
    return spmm_tile_cost(rows, cols, nnz, max(1, k), max(1, k), False, m, v, i)


def bound_bytes(model: 'sm.SparseBound', v: int = 8) -> Optional[float]:
    """A SOAP bound built with numbers (sizes, and ``S`` in words) in bytes: the larger of
    its reuse and compulsory terms (numerically: ``SparseBound.total`` asks sympy to
    compare expressions, tens of milliseconds); None when a term is still symbolic."""
    terms = [model.reuse, model.compulsory]
    if not all(getattr(t, 'is_number', True) for t in terms):
        return None
    return max(float(t) for t in terms) * v


def spmm_bound_bytes(rows, cols, nnz, k, m: Machine, v: int = 8, stats: Optional[Mapping] = None) -> Optional[float]:
    """The lower bound of SpMM (:func:`~sdfgsparse.analysis.sparse_models.spmm_model`) in
    bytes, with the last-level cache as the fast memory."""
    return bound_bytes(sm.spmm_model(nnz, rows, cols, k, S=m.llc // v, stats=stats), v)


def attention_bound_bytes(rows, cols, nnz, d, e, m: Machine, v: int = 8,
                          stats: Optional[Mapping] = None) -> Optional[float]:
    """The lower bound of sampled attention: the chain SDDMM -> SpMM over S's pattern
    (:func:`~sdfgsparse.analysis.sparse_models.chain_bound`; the softmax between them is
    element-wise), in bytes, with the last-level cache as the fast memory."""
    S = m.llc // v
    parts = [sm.sddmm_model(nnz, rows, cols, d, S=S, stats=stats, names=('S', 'Q', 'K', 'P')),
             sm.spmm_model(nnz, rows, cols, e, S=S, stats=stats, names=('P', 'V', 'O'))]
    total = sm.chain_bound(parts)
    return float(total) * v if total.is_number else None
