"""``np.einsum`` with one sparse operand whose result's indices are that operand's outer
levels, at least two (``ijk,k->ij`` of a COO or CSF tensor: TTV; ``ijk->ij``; ``ijk,jk->ijk``,
the product with a dense array on the tensor's pattern): the result keeps those levels'
pattern, sparse (a COO matrix of a COO tensor, ``CSF2`` of a CSF one; the dense I x J result of
a large tensor would not fit in memory). The contraction, its operands and its walk are
:mod:`sdfgsparse.ops.einsum`'s."""
from typing import Optional

import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.formats import SparseFormat
from sdfgsparse.formats.catalogue import coo_of_rank, csf_of_rank
from sdfgsparse.formats.counted import counted_coo
from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.lowering.graph_values import copy_index_members
from sdfgsparse.ops.base import member_conn
from sdfgsparse.ops.einsum import EinsumNode, EinsumSpec, walk_entries
from sdfgsparse.ops.validation import Size

__all__ = ['SparsePrefixEinsum', 'prefix_kernel', 'prefix_result_format', 'sparse_result']


def prefix_result_format(fmt: SparseFormat, rank: int) -> Optional[SparseFormat]:
    """The format of the dimensions ``0 .. rank - 1`` of ``fmt`` where its first levels store
    them as a tensor of their own (COO<n>'s entry and singleton levels: COO<rank>; CSF<n>'s:
    CSF<rank>; PCOO<n>'s: PCOO<rank>; ``rank == fmt.rank``: ``fmt`` itself, whatever it is),
    else None."""
    if rank < 1 or rank > fmt.rank:
        return None
    if rank == fmt.rank:
        return fmt  # (the whole pattern: any format, its own)
    for make in (coo_of_rank, csf_of_rank, counted_coo):
        if fmt is make(fmt.rank):
            return make(rank)
    return None


def sparse_result(spec: EinsumSpec, fmt: SparseFormat) -> Optional[SparseFormat]:
    """The sparse result's format where the result's indices are the sparse operand's outer
    dimensions, at least two of them (``ijk,k->ij``: TTV; ``ijk,jk->ijk``: a product with a
    dense factor on the operand's pattern, for tensors of rank 3 and more;
    :class:`SparsePrefixEinsum`), else None
    (a dense result: vectors, as NumPy's sums; matrices' products)."""
    n = len(spec.output)
    subs = spec.inputs[spec.sparse]
    if n < 2 or spec.output != subs[:n] or (n == len(subs) and (n < 3 or not spec.dense_inputs)):
        return None  # (``ijk->ijk``, no factor: the tensor made dense, as NumPy's)
    return prefix_result_format(fmt, n)  # (COO<n>, CSF<n>, PCOO<n> store their dimensions in level order)


def prefix_kernel(k: Kernel, node: 'SparsePrefixEinsum', state) -> None:
    """The result's index members copied from the sparse operand's (its outer levels), its
    values zeroed, then :func:`~sdfgsparse.ops.einsum.walk_entries` adding every product into
    the value slot of the entry's position on the result's last level."""
    spec = node.parsed
    A = k.operand('A', node.operand_type(state, 'A'))
    fmt = prefix_result_format(A.type.fmt, len(spec.output))
    vals = member_conn('out', 'vals')
    init = k.add_state('copy_indices')
    copy_index_members(k, init, fmt.member_names, 'A', 'out')
    k.fill(init, vals)
    # the position on the level that stores the result's last dimension (``c<k>``: level k);
    # the whole pattern: the value's
    n = len(spec.output)
    slot = A.pos if n == A.type.rank else A.levels[int(A.type.fmt.dims[n - 1][1:])].pos
    walk_entries(k, node, A, lambda index: (vals, [slot]), A.type.fmt.levels[0].unique,
                 parallel=node.schedule_hint != 'sequential')


@dace.library.expansion
class ExpandSparsePrefixEinsumPure(ExpandTransformation):
    """The portable SDFG (:func:`prefix_kernel`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparsePrefixEinsum', state, sdfg):
        k = Kernel(node, state, sdfg)
        prefix_kernel(k, node, state)
        return k.build()


@dace.library.node
class SparsePrefixEinsum(EinsumNode):
    """``out = np.einsum(spec, ...)`` whose result indices are the sparse operand's outer
    levels (``ijk,k->ij``): a sparse result (members ``_out_*``) of those levels' pattern, in
    the format of :func:`prefix_result_format`; operands as :class:`EinsumNode`."""
    implementations = {'pure': ExpandSparsePrefixEinsumPure}
    default_implementation = 'pure'
    SPARSE_OUTPUTS = ('out', )

    def __init__(self, name='sparse_prefix_einsum', spec='ij->i', sparse=0, *args, **kwargs):
        super().__init__(name, spec, sparse, set(), *args, **kwargs)

    def validate(self, sdfg, state):
        """:meth:`EinsumNode._wiring`; the result sparse, in :func:`prefix_result_format`'s
        format of the operand's outer levels (its indices), of their shape."""

        def result(w, spec, A):
            out = w.sparse('out', output=True)
            if A.seen is not None:
                want = prefix_result_format(A.seen.fmt, len(spec.output))
                if spec.output != spec.inputs[spec.sparse][:len(spec.output)] or want is None:
                    w.fail(errors.ShapeError, f'{spec.text!r}: the result is not the outer levels of the sparse '
                           f'operand {A.shown} ({A.seen!r})')
                if out.stored is not None and out.stored.fmt is not want:
                    w.fail(errors.FormatMismatchError, f'the result {out.shown} is {out.stored.fmt.name}, the outer '
                           f'levels of {A.seen.fmt.name} are {want.name}')
            shape = out.stored.shape if out.stored is not None else [None] * len(spec.output)
            return out, [Size(v, f'dimension {d} of {out.shown}') for d, v in enumerate(shape)]

        self._wiring(sdfg, state, result).finish()
