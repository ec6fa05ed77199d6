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
    halo_rows: np.ndarray = None
    own_entries: np.ndarray = None

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
    m = max(A.shape[0], 1)
    touched = np.unique(er * m + rows) // m
    far = np.asarray(assignment.col_owner, np.int64)[cols] != er
    halo_rows = np.unique(er[far] * m + rows[far]) // m
    return ExchangeCounts(
        expand_in=np.bincount(x_need, minlength=p), expand_out=np.bincount(x_from, minlength=p),
        fold_out=np.bincount(y_from, minlength=p), fold_in=np.bincount(y_to, minlength=p),
        messages_out=_messages(x_from, x_need, p) + _messages(y_from, y_to, p),
        entries=np.bincount(er, minlength=p), rows=np.bincount(touched, minlength=p),
        halo_rows=np.bincount(halo_rows, minlength=p), own_entries=np.bincount(er[~far], minlength=p))


def allgather_words(n: int, p: int) -> int:
    """Words an all-gather of ``x`` (length ``n``) delivers over ``p`` processes: every
    process receives the ``n - n/p`` entries it does not own."""
    return int(n * (p - 1))


@dataclasses.dataclass
class CommunicationModel:
    """Seconds of one distributed product: ``max`` over processes of the local product
    (``seconds_per_entry`` per stored entry and column, ``seconds_per_row`` per row touched
    and column, slowed by ``ranks_per_core`` > 1 when processes share cores) plus, unless
    overlapped, the exchange (``alpha`` per message, ``beta`` per byte on the wire,
    ``beta_pack`` per byte of ``x`` rows packed by the sender and ``beta_add`` per byte of
    partial rows added by the receiver) plus ``call_overhead``. With ``overlap`` the
    product runs in two parts (own columns while the halo travels, then the halo's): the
    larger of exchange and own part, plus the halo part, its rows added into ``y``
    (``beta_add``) and a second local call (``local_call``); without, ``x`` is first
    copied next to the halo (``beta_pack``). :meth:`overlap_pays` compares the two.
    ``call_overhead``: the fixed cost of a distributed product (checks, agreement).
    ``progress``: the fraction of the exchange that moves while the process computes (1
    where the network progresses messages on its own; 0 for MPICH over shared memory
    without a progress thread, where data moves only inside MPI calls: measured here, a
    split product was slower on every matrix tried).

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
    beta_add: float = 0.0
    local_call: float = 0.0
    progress: float = 1.0

    def compute_seconds(self, counts: ExchangeCounts, k: int = 1) -> np.ndarray:
        slow = max(1.0, self.ranks_per_core)
        return slow * (self.call_overhead + k * (counts.entries * self.seconds_per_entry +
                                                 counts.rows * self.seconds_per_row))

    def exchange_seconds(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8) -> np.ndarray:
        sent = counts.sent * k * itemsize
        received = (counts.expand_in + counts.fold_in) * k * itemsize
        return (self.alpha * counts.messages_out + self.beta * np.maximum(sent, received) +
                self.beta_pack * counts.expand_out * k * itemsize + self.beta_add * counts.fold_in * k * itemsize)

    def _parts(self, counts: ExchangeCounts, k: int, itemsize: int, compute, measured: bool):
        """Per process: (exchange, plain, split) seconds of the two ways to run a product:
        ``plain`` copies x next to the halo, waits, and makes one local call; ``split``
        multiplies the own columns while the halo travels, then the halo's, and adds the
        halo part's rows (see the class docstring)."""
        exchange = self.exchange_seconds(counts, k, itemsize)
        if compute is None:
            compute = self.compute_seconds(counts, k) - self.call_overhead * max(1.0, self.ranks_per_core)
        compute = np.asarray(compute, np.float64)
        share = counts.own_entries / np.maximum(counts.entries, 1) if counts.own_entries is not None else 1.0
        own, far = compute * share, compute * (1 - share)
        halo = counts.expand_in > 0
        own_rows = np.maximum(counts.rows - counts.fold_out, 0)
        copy = self.beta_pack * own_rows * k * itemsize * halo
        halo_rows = counts.halo_rows if counts.halo_rows is not None else counts.rows
        second_call = 0.0 if measured else self.local_call
        add = self.beta_add * halo_rows * k * itemsize * halo
        plain = self.call_overhead + compute + exchange + copy
        hidden = exchange * self.progress  # what moves while the own columns are multiplied
        split = self.call_overhead + np.maximum(hidden, own) + (exchange - hidden) + far + second_call + add
        return exchange, plain, np.where(halo, split, plain)

    def overlap_pays(self, counts: ExchangeCounts, rank: int, k: int = 1, itemsize: int = 8) -> bool:
        """Whether process ``rank`` should split its product to overlap the exchange."""
        if counts.expand_in[rank] == 0:
            return False
        _, plain, split = self._parts(counts, k, itemsize, None, False)
        return bool(split[rank] < plain[rank])

    def seconds(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8, overlap=False, compute=None) -> float:
        """The modelled seconds of one product (the slowest process). ``compute``: the
        measured per-process seconds of the local call(s) as the product makes them (else
        from ``seconds_per_entry``); ``overlap``: True, False, None (each process as
        :meth:`overlap_pays` chooses), or one choice per process."""
        _, plain, split = self._parts(counts, k, itemsize, compute, compute is not None)
        if overlap is None:
            overlap = [self.overlap_pays(counts, r, k, itemsize) for r in range(len(plain))]
        per_rank = np.where(np.asarray(overlap, bool), split, plain)
        return float(per_rank.max()) if np.size(per_rank) else 0.0
