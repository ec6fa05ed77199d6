"""A view of a tensor (or of a matrix seen with another rank) as storage of its own: the
stored entries that the view keeps, at the view's coordinates, in a counted coordinate list
(:func:`~sdfgsparse.formats.counted.counted_coo`, ``PCOO<n>``).

Views (:mod:`sdfgsparse.formats.views`: ``T.transpose(axes)``, ``np.moveaxis``, reshapes
between ranks, ``np.expand_dims`` / ``np.squeeze``, slices, ``np.stack``) have no storage;
the operations that iterate a view read the stored tensor through it. The frontend inserts
this node where a view of a rank other than 2 must exist as data: where it is returned, or
read by an operation that does not iterate views. The entries keep the stored walk's order
(a coordinate list's order is free), so a transposition or a reshape costs one pass.

Without a guard (no slice of a compressed or singleton level) every stored entry is kept:
``pos1 = [0, entries]`` and one parallel pass writes each entry's coordinates and value at its
slot. With one, a first pass marks the kept slots, a prefix sum numbers them (``pos1[1]``: how
many), and a second pass moves each kept entry to its number; the arrays keep the stored
tensor's entries as capacity.
"""
from typing import Sequence, Tuple

import dace
import dace.library
import sympy
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.formats.counted import is_counted_coo
from sdfgsparse.lowering.graph import Kernel, Operand, Scope, read
from sdfgsparse.lowering.graph_compress import scan, tasklet
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['SparseMaterialise', 'portable_kernel', 'gather_entries']


def portable_kernel(k: Kernel, node: 'SparseMaterialise', state) -> None:
    """The passes of the module docstring, built into ``k``."""
    gather_entries(k, [(k.operand('A', node.operand_type(state, 'A')), 1)], 'out')


def gather_entries(k: Kernel, operands: Sequence[Tuple[Operand, int]], out: str) -> None:
    """The entries of ``operands`` (``(operand, sign)``: each a sparse operand of the result's
    rank, seen with the result's shape, its values times ``sign``), one operand after the
    other, into the ``PCOO<n>`` members of ``out`` (a prefix: ``_<out>_pos1``, ...): each
    operand's entries in its walk order, those its guard drops left out; ``pos1 = [0,
    entries]``. One operand without a guard is one parallel pass; otherwise each operand's
    kept entries are marked and listed in one pass, numbered by a prefix sum and moved after
    the entries of the operands before it in another."""
    rank = operands[0][0].type.rank
    pos = member_conn(out, 'pos1')
    crds = [member_conn(out, f'crd{d + 1}') for d in range(rank)]
    vals = member_conn(out, 'vals')
    vdtype = k.sdfg.arrays[vals].dtype
    if len(operands) == 1 and operands[0][0].guard is None:
        (A, sign), = operands
        n = sympy.sympify(A.nvals)
        k.compute(Scope.at(k.add_state('count')), (pos, [0]), 0, label='count', more=[((pos, [1]), n)])
        sc = k.entries(k.add_state('entries'), A)
        k.compute(sc, (vals, [A.pos]), sign * A.value, label='entries',
                  more=[((c, [A.pos]), e) for c, e in zip(crds, A.coords)])
        return
    # before[j]: the entries of the operands before operand j
    before = k.transient('before', [len(operands) + 1], dace.int64)
    k.compute(Scope.at(k.add_state('before')), (before, [0]), 0, label='before')
    for j, (A, sign) in enumerate(operands):
        n = sympy.sympify(A.nvals)
        keep = k.transient(f'keep{j}', [n], dace.int64)
        k.fill(k.add_state(f'keep{j}_zero'), keep)
        lists = [k.transient(f'coord{j}_{d}', [n], dace.int64) for d in range(rank)]
        values = k.transient(f'value{j}', [n], vdtype)
        sc = k.entries(k.add_state(f'mark{j}'), A)
        k.compute(sc, (keep, [A.pos]), 1, guard=A.guard, label=f'mark{j}',
                  more=[((c, [A.pos]), e) for c, e in zip(lists, A.coords)] + [((values, [A.pos]), sign * A.value)])
        at = k.transient(f'at{j}', [n + 1], dace.int64)
        scan(k, f'number{j}', keep, at, n)
        q = f'__mq{j}'
        sc = k.scope(k.add_state(f'move{j}'), [(q, 0, n)], [dace.ScheduleType.Default])
        # the slot into a local first: DaCe 1.0.2 garbles an array read inside an output's index
        code = 'if _k != 0:\n    u_d = _b + _at\n' + ''.join(f'    _o{d}[u_d] = _c{d}\n' for d in range(rank)) + \
            '    _ov[u_d] = _v\n'
        inputs = {'_k': f'{keep}[{q}]', '_at': f'{at}[{q}]', '_v': f'{values}[{q}]', '_b': f'{before}[{j}]'}
        inputs.update({f'_c{d}': f'{lists[d]}[{q}]' for d in range(rank)})
        outputs = {f'_o{d}': crds[d] for d in range(rank)}
        outputs['_ov'] = vals
        tasklet(k, sc, f'move{j}', code, inputs, outputs)
        k.compute(Scope.at(k.add_state(f'before{j + 1}')), (before, [j + 1]), read(before, j) + read(at, n),
                  label=f'before{j + 1}')
    k.compute(Scope.at(k.add_state('count')), (pos, [0]), 0, label='count',
              more=[((pos, [1]), read(before, len(operands)))])


@dace.library.expansion
class ExpandSparseMaterialisePure(ExpandTransformation):
    """The portable SDFG (:func:`portable_kernel`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseMaterialise', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


@dace.library.node
class SparseMaterialise(SparseLibraryNode):
    """Members of ``A`` (sparse data of any rank, read through its view) -> members of ``out``,
    a ``PCOO<n>`` tensor of the shape A is seen with, holding A's entries as seen."""
    implementations = {'pure': ExpandSparseMaterialisePure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True
    SPARSE_OUTPUTS = ('out', )

    def __init__(self, name='sparse_materialise', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """A's members; a ``PCOO`` result of A's rank and shape (as A is seen), of A's dtype
        (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        A, out = w.sparse('A'), w.sparse('out', output=True)
        if out.stored is not None and not is_counted_coo(out.stored.fmt):
            w.fail(errors.FormatMismatchError, f'result {out.shown} is {out.stored.fmt.name}; the node writes a '
                   'counted coordinate list (PCOO<n>)')
        if out.seen is not None and A.seen is not None and out.seen.rank != A.seen.rank:
            w.fail(errors.ShapeError, f'result {out.shown} has {out.seen.rank} dimensions, {A.shown} '
                   f'{A.seen.rank}')
        for a, b in zip(out.dims(), A.dims()):
            w.same(a, b)
        w.computes(out, A)
        w.finish()
