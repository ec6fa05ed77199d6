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
    the dense operand. ``halo_rows``: rows with an entry in a column owned elsewhere;
    ``own_entries``: entries in own columns; ``owned_cols``: entries of ``x`` owned;
    ``expand_links`` / ``fold_links``: one row ``(sender, receiver, words)`` per message
    of each phase (who waits for whom)."""
    expand_in: np.ndarray
    expand_out: np.ndarray
    fold_out: np.ndarray
    fold_in: np.ndarray
    messages_out: np.ndarray
    entries: np.ndarray
    rows: np.ndarray
    halo_rows: np.ndarray = None
    own_entries: np.ndarray = None
    owned_cols: np.ndarray = None
    expand_links: np.ndarray = None
    fold_links: np.ndarray = None

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


def _links(src: np.ndarray, dst: np.ndarray, p: int) -> np.ndarray:
    """One row ``(sender, receiver, words)`` per distinct pair."""
    if src.size == 0:
        return np.zeros((0, 3), np.int64)
    pairs, words = np.unique(src.astype(np.int64) * p + dst, return_counts=True)
    return np.stack([pairs // p, pairs % p, words], axis=1)


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
    expand, fold = _links(x_from, x_need, p), _links(y_from, y_to, p)
    return ExchangeCounts(
        expand_in=np.bincount(x_need, minlength=p), expand_out=np.bincount(x_from, minlength=p),
        fold_out=np.bincount(y_from, minlength=p), fold_in=np.bincount(y_to, minlength=p),
        messages_out=np.bincount(expand[:, 0], minlength=p) + np.bincount(fold[:, 0], minlength=p),
        entries=np.bincount(er, minlength=p), rows=np.bincount(touched, minlength=p),
        halo_rows=np.bincount(halo_rows, minlength=p), own_entries=np.bincount(er[~far], minlength=p),
        owned_cols=np.bincount(np.asarray(assignment.col_owner, np.int64), minlength=p),
        expand_links=expand, fold_links=fold)


def allgather_words(n: int, p: int) -> int:
    """Words an all-gather of ``x`` (length ``n``) delivers over ``p`` processes: every
    process receives the ``n - n/p`` entries it does not own."""
    return int(n * (p - 1))


@dataclasses.dataclass
class CommunicationModel:
    """Seconds of one distributed product, from a timeline of its phases on every process
    (:meth:`timeline`). Per process ``r`` (``w`` bytes per word: ``k`` columns x itemsize):

    1. pack the ``expand_out`` entries others need (``beta_pack`` per byte) and start the
       messages; a plain product then copies its own ``x`` next to the halo (``beta_copy``
       per byte of ``owned_cols``), a split one multiplies its own columns;
    2. the expand: with ``progress`` 1 (a network that moves data on its own) a message
       arrives ``alpha`` + ``beta`` per byte after its sender started it; with ``progress`` 0
       (MPICH over shared memory: data moves only inside MPI calls) it moves once both
       ends wait, so a process's halo is complete ``alpha`` per message + ``beta`` per byte
       (the larger of sent and received, each) after the last of it and its partners (the
       ``expand_links``) entered the wait; in between, a weighted mean;
    3. the local product (measured, or ``seconds_per_entry`` per entry and column plus
       ``seconds_per_row`` per row touched and column); a split product multiplies the halo columns' rows now
       (``local_call`` for the second call) and adds them (``beta_add`` per byte);
    4. the fold of partial rows (copied out at ``beta_copy``, moved as the expand over the
       ``fold_links``, added at ``beta_add``).

    The product ends when the last process does (it agrees at the end), plus
    ``call_overhead`` (checks and agreement). With ``cores`` set and fewer cores than
    processes, no faster than the processes' busy seconds shared over the cores.
    :meth:`overlap_pays` compares the plain and split products of one process.

    Every rate is one number or one per process. Calibrate ``seconds_per_entry`` from a
    one-process run on the machine in question; ``alpha`` / ``beta`` from a ping-pong there
    or from the network's data sheet (docs/performance.md's 1,000-node prediction states its
    values). On one node, ``sdfgsparse bench --distributed`` measures every process's
    rates in a rehearsal of its product (shared memory's rate depends on the message size
    and the caches' state)."""
    alpha: float
    beta: float
    seconds_per_entry: float
    seconds_per_row: float = 0.0
    call_overhead: float = 0.0
    beta_pack: float = 0.0
    beta_add: float = 0.0
    local_call: float = 0.0
    progress: float = 1.0
    beta_copy: float = 0.0
    cores: Optional[int] = None

    def __post_init__(self):
        if self.cores is not None and self.cores < 1:
            raise ValueError(f'cores={self.cores!r}: expected None or at least 1')
        if np.ndim(self.call_overhead) or np.ndim(self.local_call) or np.ndim(self.progress):
            raise ValueError('call_overhead, local_call and progress are single numbers (rates may be per process)')

    def compute_seconds(self, counts: ExchangeCounts, k: int = 1) -> np.ndarray:
        """Per process: a product's fixed cost plus its local product by the model."""
        return self.call_overhead + k * (counts.entries * self.seconds_per_entry + counts.rows * self.seconds_per_row)

    def exchange_seconds(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8) -> np.ndarray:
        """Per process: the seconds of its messages alone (both phases, no waiting)."""
        sent = counts.sent * k * itemsize
        received = (counts.expand_in + counts.fold_in) * k * itemsize
        return (self.alpha * counts.messages_out + self.beta * np.maximum(sent, received) +
                self.beta_pack * counts.expand_out * k * itemsize + self.beta_add * counts.fold_in * k * itemsize)

    def _split_compute(self, counts: ExchangeCounts, k: int):
        """(own columns, halo columns) seconds of a split product by the model: the halo
        part touches its rows a second time."""
        own_entries = counts.own_entries if counts.own_entries is not None else counts.entries
        halo_rows = counts.halo_rows if counts.halo_rows is not None else counts.rows
        own = k * (own_entries * self.seconds_per_entry + counts.rows * self.seconds_per_row)
        far = k * ((counts.entries - own_entries) * self.seconds_per_entry + halo_rows * self.seconds_per_row)
        return own, far

    def _phases(self, counts: ExchangeCounts, k: int, itemsize: int, compute, split):
        """Per process, as plain or ``split`` products: the seconds of packing, of its work
        before the expand wait (packing included), after it, of copying partial rows out,
        and of its expand and fold transfers."""
        w = k * itemsize
        p = counts.entries.size
        split = np.broadcast_to(np.asarray(split, bool), (p,))
        halo = counts.expand_in > 0
        split = split & halo
        if compute is None:
            plain_c = self.compute_seconds(counts, k) - self.call_overhead
            own, far = self._split_compute(counts, k)
            far = far + self.local_call
        else:  # measured: the calls as the product makes them (both parts where it splits),
            # shared out by entries
            plain_c = np.asarray(compute, np.float64)
            share = counts.own_entries / np.maximum(counts.entries, 1) if counts.own_entries is not None else 1.0
            own, far = plain_c * share, plain_c * (1 - share)
        owned = counts.owned_cols if counts.owned_cols is not None else np.maximum(counts.rows - counts.fold_out, 0)
        halo_rows = counts.halo_rows if counts.halo_rows is not None else counts.rows
        pack = self.beta_pack * counts.expand_out * w
        copy = self.beta_copy * owned * w * halo
        add = self.beta_add * halo_rows * w
        before = pack + np.where(split, own, copy)
        after = np.where(split, far + add, plain_c)
        fold_copy = self.beta_copy * counts.fold_out * w
        msgs_x, msgs_y = (np.maximum(np.bincount(links[:, 0], minlength=p), np.bincount(links[:, 1], minlength=p))
                          if links is not None else default for links, default in
                          ((counts.expand_links, counts.messages_out), (counts.fold_links, 0)))
        xfer_x = self.alpha * msgs_x + self.beta * np.maximum(counts.expand_out, counts.expand_in) * w
        xfer_y = self.alpha * msgs_y + self.beta * np.maximum(counts.fold_out, counts.fold_in) * w + \
            self.beta_add * counts.fold_in * w
        return pack, before, after, fold_copy, xfer_x, xfer_y

    def _wait(self, links, started, entered, xfer):
        """When each process's messages of one phase are done: its partners started them at
        ``started`` and entered the wait at ``entered`` (see the class docstring)."""
        if links is None:  # counts without links: every process waits only for itself
            return entered + xfer
        src, dst = links[:, 0], links[:, 1]
        partners = entered.copy()  # no progress: both ends must be in MPI
        np.maximum.at(partners, dst, entered[src])
        np.maximum.at(partners, src, entered[dst])
        arrival = entered.copy()  # progress: a message arrives after its sender started it
        np.maximum.at(arrival, dst, started[src] + xfer[dst])
        moved = np.maximum(entered, arrival)
        stalled = partners + xfer
        return self.progress * moved + (1 - self.progress) * stalled

    def _choices(self, counts: ExchangeCounts, k: int, itemsize: int, overlap):
        if overlap is None:
            return [self.overlap_pays(counts, r, k, itemsize) for r in range(counts.entries.size)]
        return overlap

    def timeline(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8, overlap=False, compute=None):
        """Per process: the seconds at which its part of one product ends (before the
        closing agreement and without ``call_overhead``). ``overlap``: True, False, None
        (each process as :meth:`overlap_pays` chooses) or one choice per process;
        ``compute``: measured per-process seconds of the local call(s)."""
        overlap = self._choices(counts, k, itemsize, overlap)
        pack, before, after, fold_copy, xfer_x, xfer_y = self._phases(counts, k, itemsize, compute, overlap)
        got = self._wait(counts.expand_links, pack, before, xfer_x)
        done = got + after
        if counts.fold_links is not None and counts.fold_links.size == 0:
            return done
        ready = done + fold_copy
        return self._wait(counts.fold_links, ready, ready, xfer_y)

    def busy_seconds(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8, overlap=False, compute=None):
        """Per process: the seconds it computes, copies and moves data (not waiting)."""
        overlap = self._choices(counts, k, itemsize, overlap)
        pack, before, after, fold_copy, xfer_x, xfer_y = self._phases(counts, k, itemsize, compute, overlap)
        return before + after + fold_copy + xfer_x + np.where(counts.fold_out + counts.fold_in > 0, xfer_y, 0.0)

    def overlap_pays(self, counts: ExchangeCounts, rank: int, k: int = 1, itemsize: int = 8) -> bool:
        """Whether process ``rank`` should split its product to overlap the exchange: the
        product's choice, made alike on every process (the counts are global), where
        splitting every process with a halo ends the product sooner than splitting none.
        Without progress a split process enters the exchange only after its own columns'
        product and its partners wait for it, so a process's choice is not its own."""
        halo = counts.expand_in > 0
        if not halo[rank]:
            return False
        plain = self.timeline(counts, k, itemsize, np.zeros(halo.size, bool)).max()
        return bool(self.timeline(counts, k, itemsize, halo).max() < plain)

    def seconds(self, counts: ExchangeCounts, k: int = 1, itemsize: int = 8, overlap=False, compute=None) -> float:
        """The modelled seconds of one product (the slowest process). ``compute``: the
        measured per-process seconds of the local call(s) as the product makes them (else
        from ``seconds_per_entry``); ``overlap``: True, False, None (each process as
        :meth:`overlap_pays` chooses), or one choice per process."""
        if not np.size(counts.entries):
            return 0.0
        overlap = self._choices(counts, k, itemsize, overlap)
        end = float(self.timeline(counts, k, itemsize, overlap, compute).max())
        p = counts.entries.size
        if self.cores is not None and p > self.cores:
            end = max(end, float(self.busy_seconds(counts, k, itemsize, overlap, compute).sum()) / self.cores)
        return end + self.call_overhead
