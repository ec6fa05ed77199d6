"""Sparsifiers: which entries of a dense weight to keep, composed with a layout to store them.

As in STen, a sparsifier and a layout are separate pieces: the sparsifier scores the
entries of a weight (higher is kept), the layout decides the pattern the kept entries may
form and how they are stored:

* an unstructured layout (``ss.CSR``, ``ss.COO``, ``ss.CSC``, ...) keeps the
  ``round(density * numel)`` best scores (at least one; ties to the lower flat index);
* a structured layout (``ss.NM[2, 4]``, ``ss.GNM[8, 2, 4]``, ``ss.VNM[64, 2, 8]``) keeps the
  best scores its pattern allows (each group's ``n`` best; GNM and VNM choose shared
  columns by summed scores); its density is the pattern's, so ``density`` must be None;
* :class:`Block` keeps whole ``R x C`` blocks (by their summed magnitude) in BSR.

Kept entries keep their value, also when it is zero (the slot stays trainable).

>>> import sdfgsparse as ss                                            # doctest: +SKIP
>>> ss.torch.Magnitude(layout=ss.NM[2, 4])(linear.weight)              # doctest: +SKIP
LayoutTensor(ss.NM[2, 4], shape=(64, 128), 4096 values, dtype=torch.float32)
"""
from typing import Optional, Tuple

import numpy as np
import torch

from sdfgsparse import errors
from sdfgsparse.formats import BSR, CSR
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.convert import slot_coordinates, to_storage
from sdfgsparse.runtime.host_convert import convert
from sdfgsparse.frontends.torch_dispatch import LayoutTensor

__all__ = ['Sparsifier', 'Magnitude', 'Random', 'Block']


def _structured(fmt) -> bool:
    return getattr(fmt, 'pattern', None) is not None


def check_density(density, who: str) -> float:
    """``density`` as a float in (0, 1] (Python or NumPy numbers, not booleans), else an
    ArgumentError naming ``who``."""
    if isinstance(density, (bool, np.bool_)) or not isinstance(density, (int, float, np.integer, np.floating)) or \
            not 0 < float(density) <= 1:
        raise errors.ArgumentError(f'{who}: density must be a number in (0, 1], got {density!r}')
    return float(density)


def check_seed(seed, who: str) -> int:
    """``seed`` as an int (Python or NumPy integers, not booleans), else an ArgumentError."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise errors.ArgumentError(f'{who}: seed must be an integer, got {seed!r}')
    return int(seed)


class Sparsifier:
    """Base class: ``scores(W)`` (a float64 array, higher is kept) and the layout to store
    the kept entries in. Calling it on a 2-D weight gives a :class:`LayoutTensor` whose
    values are a new leaf tensor (``requires_grad`` of the weight)."""

    def __init__(self, density: Optional[float] = None, layout=None):
        layout = CSR if layout is None else layout
        if not hasattr(layout, 'member_names'):
            raise errors.ArgumentError(f'{type(self).__name__}: layout must be a catalogue format (ss.CSR, '
                                       f'ss.NM[2, 4], ...), got {layout!r}')
        if _structured(layout):
            if density is not None:
                raise errors.ArgumentError(f'{type(self).__name__}: {layout!r} fixes the density '
                                           f'({layout.pattern.density:g}); pass density=None')
        else:
            density = check_density(density, type(self).__name__)
        self.density = density
        self.layout = layout

    def scores(self, W: torch.Tensor) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, W: torch.Tensor) -> LayoutTensor:
        W2 = _matrix(W, type(self).__name__)
        index, values = self.storage(W2, self.scores(W2))
        return LayoutTensor(self.layout, W2.shape, index, values.requires_grad_(W.requires_grad))

    def storage(self, W: torch.Tensor, scores: np.ndarray):
        """(index tensors, values) of ``W``'s entries that ``scores`` keep, in the layout."""
        return pattern_storage(self.layout, W, scores, self.density)

    def __repr__(self):
        d = '' if self.density is None else f'{self.density:g}, '
        return f'ss.torch.{type(self).__name__}({d}layout={self.layout!r})'


class Magnitude(Sparsifier):
    """Keep the largest magnitudes (a NaN counts as the largest)."""

    def scores(self, W):
        s = W.detach().abs().double().numpy().copy()
        s[np.isnan(s)] = np.inf
        return s


class Random(Sparsifier):
    """Keep a uniformly random choice of entries (``seed``: the generator's seed; the same
    seed and shape give the same pattern)."""

    def __init__(self, density: Optional[float] = None, layout=None, seed: int = 0):
        super().__init__(density, layout)
        self.seed = check_seed(seed, type(self).__name__)

    def scores(self, W):
        return np.random.default_rng(self.seed).random(tuple(W.shape)) + 1.0  # no 0: every score is a candidate


class Block(Sparsifier):
    """Keep the ``R x C`` blocks of largest summed magnitude (``density``: the fraction of
    blocks kept), stored as BSR with that block shape."""

    def __init__(self, density: float, block: Tuple[int, int] = (4, 4)):
        try:
            R, C = (int(b) for b in block)
        except (TypeError, ValueError):
            raise errors.ArgumentError(f'Block: block must be (rows, cols), got {block!r}') from None
        super().__init__(density, BSR.with_block(R, C))
        self.block = (R, C)

    def scores(self, W):
        R, C = self.block
        r, c = W.shape
        if r % R or c % C:
            raise errors.ShapeError(f'Block: a {r} x {c} weight is not a multiple of the block {R}x{C}')
        s = W.detach().abs().double().numpy()
        s = np.where(np.isnan(s), np.inf, s).reshape(r // R, R, c // C, C).sum(axis=(1, 3))
        return s

    def storage(self, W, scores):
        R, C = self.block
        nb = scores.size
        keep = np.zeros(nb, dtype=bool)
        keep[np.argsort(-scores.reshape(-1), kind='stable')[:max(1, round(self.density * nb))]] = True
        keep = keep.reshape(scores.shape)
        brow, bcol = np.nonzero(keep)  # row-major: BSR order
        pos = np.zeros(scores.shape[0] + 1, dtype=np.int32)
        pos[1:] = np.cumsum(keep.sum(axis=1))
        Wn = W.detach().reshape(scores.shape[0], R, scores.shape[1], C).permute(0, 2, 1, 3)
        vals = Wn[torch.from_numpy(brow), torch.from_numpy(bcol)].reshape(-1).clone()
        return [torch.from_numpy(pos), torch.from_numpy(bcol.astype(np.int32))], vals

    def __repr__(self):
        return f'ss.torch.Block({self.density:g}, block={self.block})'


def _matrix(W, who: str) -> torch.Tensor:
    if not isinstance(W, torch.Tensor) or W.layout != torch.strided:
        raise errors.ArgumentError(f'{who}: expected a dense weight tensor, got {type(W).__name__}')
    if W.dim() == 4 and tuple(W.shape[2:]) == (1, 1):  # a 1x1 convolution's [out, in, 1, 1]
        W = W.reshape(W.shape[0], W.shape[1])
    if W.dim() != 2:
        raise errors.ShapeError(f'{who}: expected a 2-D weight (or a 1x1 convolution\'s), got shape {tuple(W.shape)}')
    if W.dtype not in (torch.float32, torch.float64):
        raise errors.DTypeError(f'{who}: weights must be float32 or float64, got {W.dtype}')
    return W


def pattern_storage(fmt, W: torch.Tensor, scores: np.ndarray, density: Optional[float] = None):
    """(index tensors, values) of the entries of ``W`` that the best ``scores`` keep in
    layout ``fmt`` (int32 indices; values: a copy of ``W``'s at the kept positions)."""
    rows, cols = W.shape
    Wd = W.detach()
    if _structured(fmt):
        S = convert(scores, fmt, prune=True)
        arrays = dict(S.arrays)
    else:
        keep = max(1, round(float(density) * rows * cols))
        flat = np.argsort(-scores.reshape(-1), kind='stable')[:keep]
        flat.sort()  # row-major: CSR order
        r, c = np.divmod(flat, cols)
        pos = np.zeros(rows + 1, dtype=np.int64)
        np.add.at(pos, r + 1, 1)
        csr = SparseMatrix(CSR, {'pos1': np.cumsum(pos), 'crd1': c, 'vals': np.ones(keep)}, (rows, cols))
        if fmt.name == 'CSR':
            arrays = dict(csr.arrays)
        else:  # another unstructured layout: the pattern (values 1, so none is dropped) converted
            arrays, _ = to_storage(csr, fmt, np.int32)
    r, c, q = slot_coordinates(fmt, arrays, (rows, cols))
    vals = torch.zeros(arrays['vals'].shape[0], dtype=W.dtype)
    vals[torch.from_numpy(q.astype(np.int64))] = Wd[torch.from_numpy(r.astype(np.int64)), torch.from_numpy(
        c.astype(np.int64))]
    names = [m for m in fmt.member_names if m != 'vals']
    return [torch.from_numpy(np.ascontiguousarray(arrays[m], dtype=np.int32)) for m in names], vals
