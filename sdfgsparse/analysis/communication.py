"""Data movement between processes: what a partition of a sparse product must send, and a
model of its time on 1 to 1,000s of nodes.

A partition of ``y = A @ x`` over ``p`` processes is an :class:`Assignment`: who owns each
entry of ``y`` (``row_owner``), of ``x`` (``col_owner``) and who multiplies each stored
entry of ``A`` (``entry_rank``). Whatever the algorithm, a process that multiplies an entry
``A[i, j]`` needs ``x[j]``: if another process owns it, at least one word must reach it
(*expand*); a process that adds into ``y[i]`` owned by another must send at least one word
for it (*fold*). Counted once per (process, index), these are the partition's lower bound
on words moved per product (per column of ``X`` for SpMM) — the bound for the halo of a
1-D row partition (its distinct off-process columns), for 2-D blocks (expand along process
columns plus fold along process rows) and for the arrow decomposition alike
(:func:`exchange_counts`). An exchange that sends exactly the needed entries, as
:mod:`sdfgsparse.distributed` does, meets it; an all-gather of ``x`` sends
``(p - 1) * n`` words instead (:func:`allgather_words`).

:class:`CommunicationModel` turns counts into seconds (latency ``alpha`` per message,
``beta`` per byte, compute per stored entry measured on this machine); its assumptions are
its fields.
"""
import dataclasses
from typing import Optional

import numpy as np
import scipy.sparse as sp

__all__ = ['Assignment', 'ExchangeCounts', 'exchange_counts', 'allgather_words', 'CommunicationModel']


@dataclasses.dataclass
class Assignment:
    """Who owns and who computes what in ``y = A @ x`` over ``nranks`` processes.

    ``row_owner`` (m,), ``col_owner`` (n,): the process holding each entry of ``y`` / ``x``;
    ``entry_rank`` (nnz,): the process multiplying each stored entry of ``A`` in canonical
    CSR order. ``kind``: the partition's name ('rows', '2d', 'arrow'); ``levels``: the arrow
    decomposition's level of each entry (else None)."""
    nranks: int
    row_owner: np.ndarray
    col_owner: np.ndarray
    entry_rank: np.ndarray
    kind: str = 'rows'
    levels: Optional[np.ndarray] = None
    grid: Optional[tuple] = None

    def entries_per_rank(self) -> np.ndarray:
        return np.bincount(self.entry_rank, minlength=self.nranks)


@dataclasses.dataclass
class ExchangeCounts:
    """Per process: words received for ``x`` (``expand_in``) and sent for ``x``
    (``expand_out``), partial sums of ``y`` sent (``fold_out``) and received (``fold_in``),
    messages sent (``messages_out``: one per distinct destination and phase), and stored
    entries multiplied (``entries``) and rows touched (``rows``). Words are per column of
    the dense operand."""
    expand_in: np.ndarray
    expand_out: np.ndarray
    fold_out: np.ndarray
    fold_in: np.ndarray
    messages_out: np.ndarray
    entries: np.ndarray
    rows: np.ndarray

    @property
    def sent(self) -> np.ndarray:
        """Words each process sends per product (per column of X)."""
        return self.expand_out + self.fold_out

    @property
    def total(self) -> int:
        """Words moved per product (per column of X), the partition's lower bound."""
        return int(self.expand_in.sum() + self.fold_out.sum())


def _pairs(owner_of_index: np.ndarray, rank: np.ndarray, index: np.ndarray, p: int):
    """Distinct (rank, index) pairs whose index is owned elsewhere: (needing rank, owner)."""
    n = max(int(owner_of_index.size), 1)
    keys = np.unique(rank.astype(np.int64) * n + index.astype(np.int64))
    r, i = keys // n, keys % n
    owner = owner_of_index[i]
    far = owner != r
    return r[far], owner[far]


def _messages(src: np.ndarray, dst: np.ndarray, p: int) -> np.ndarray:
    if src.size == 0:
        return np.zeros(p, np.int64)
    pairs = np.unique(src.astype(np.int64) * p + dst)
    return np.bincount(pairs // p, minlength=p)


def exchange_counts(A, assignment: Assignment) -> ExchangeCounts:
    """The words and messages of one product ``A @ x`` under ``assignment`` (the
    partition's lower bound on words: see the module docstring). ``A``: scipy sparse,
    its stored entries in canonical CSR order (as ``assignment.entry_rank``)."""
    A = sp.csr_array(A)
    p = assignment.nranks
    rows = np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(A.indptr))
    cols = A.indices.astype(np.int64)
    er = np.asarray(assignment.entry_rank, np.int64)
    if er.size != A.nnz:
        raise ValueError(f'assignment.entry_rank has {er.size} entries, A stores {A.nnz}')
    x_need, x_from = _pairs(np.asarray(assignment.col_owner, np.int64), er, cols, p)
    y_from, y_to = _pairs(np.asarray(assignment.row_owner, np.int64), er, rows, p)
    touched = np.unique(er * max(A.shape[0], 1) + rows) // max(A.shape[0], 1)
    return ExchangeCounts(
        expand_in=np.bincount(x_need, minlength=p), expand_out=np.bincount(x_from, minlength=p),
        fold_out=np.bincount(y_from, minlength=p), fold_in=np.bincount(y_to, minlength=p),
        messages_out=_messages(x_from, x_need, p) + _messages(y_from, y_to, p),
        entries=np.bincount(er, minlength=p), rows=np.bincount(touched, minlength=p))


def allgather_words(n: int, p: int) -> int:
    """Words an all-gather of ``x`` (length ``n``) delivers over ``p`` processes: every
    process receives the ``n - n/p`` entries it does not own."""
    return int(n * (p - 1))


@dataclasses.dataclass
class CommunicationModel:
    """Seconds of one distributed product: ``max`` over processes of the local product
    (``seconds_per_entry`` per stored entry and column, ``seconds_per_row`` per row touched
    and column, slowed by ``ranks_per_core`` > 1 when processes share cores) plus, unless
    overlapped, the exchange (``alpha`` per message, ``beta`` per byte on the wire, and
    ``beta_pack`` per byte packed by the sender and placed or added by the receiver; with
    ``overlap``, the larger of the two) plus ``call_overhead``.

    Calibrate ``seconds_per_entry`` from a one-process run on the machine in question;
    ``alpha`` / ``beta`` from a ping-pong there (shared memory) or from the network's data
    sheet (the README's 1,000-node prediction states its values)."""
    alpha: float
    beta: float
    seconds_per_entry: float
    seconds_per_row: float = 0.0
    call_overhead: float = 0.0
    ranks_per_core: float = 1.0
    beta_pack: float = 0.0

    def compute_seconds(self, counts: ExchangeCounts, k: int = 1) -> np.ndarray:
        slow = max(1.0, self.ranks_per_core)
        return slow * (self.call_overhead + k * (counts.entries * self.seconds_per_entry +
                                                 counts.rows * self.seconds_per_row))

    def exchange_seconds(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8) -> np.ndarray:
        sent = counts.sent * k * itemsize
        received = (counts.expand_in + counts.fold_in) * k * itemsize
        return (self.alpha * counts.messages_out + self.beta * np.maximum(sent, received) +
                self.beta_pack * (sent + received))

    def seconds(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8, overlap: bool = False,
                compute=None) -> float:
        """The modelled seconds of one product; ``compute``: per-process seconds of the
        local product measured (instead of ``seconds_per_entry``), plus ``call_overhead``."""
        compute = self.compute_seconds(counts, k) if compute is None else \
            np.asarray(compute, np.float64) + self.call_overhead
        exchange = self.exchange_seconds(counts, k, itemsize)
        per_rank = np.maximum(compute, exchange) if overlap else compute + exchange
        return float(per_rank.max()) if per_rank.size else 0.0
