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
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.formats.counted import is_counted_coo
from sdfgsparse.lowering.graph import Kernel, Operand, Scope, read
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph_compress import counting_sort, scan, tasklet
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['SparseMaterialise', 'portable_kernel', 'gather_entries', 'coalesce_entries', 'list_entries', 'compact',
           'validate_counted']


def portable_kernel(k: Kernel, node: 'SparseMaterialise', state) -> None:
    """The passes of the module docstring, built into ``k`` (:func:`coalesce_entries` where
    the node coalesces)."""
    A = k.operand('A', node.operand_type(state, 'A'))
    if node.coalesce:
        coalesce_entries(k, [A], 'out')
    else:
        gather_entries(k, [(A, 1)], 'out')


def coalesce_entries(k: Kernel, operands: Sequence[Operand], out: str, product: bool = False) -> None:
    """The entries of ``operands`` (sparse operands of one shape), sorted by coordinates, into
    the ``PCOO<n>`` members of ``out``: those of equal coordinates summed (one operand: its
    duplicates), or, with ``product`` (two operands), the product of the two operands' sums
    where both hold the coordinates (an element-wise product: the intersection).

    A parallel pass per operand lists every slot's coordinates and value after the slots of
    the operands before it (a slot that holds no entry, or that the guard drops, gets the
    coordinates ``shape``: it sorts last), stable counting sorts by the last dimension to the
    first (:func:`~sdfgsparse.lowering.graph_compress.counting_sort`, the operand's number
    moving along), then one sequential pass writes each run of equal coordinates as one
    entry until the first dropped slot."""
    A = operands[0]
    rank = A.type.rank
    shape = [sympy.sympify(v) for v in A.type.shape]
    pos = member_conn(out, 'pos1')
    crds = [member_conn(out, f'crd{d + 1}') for d in range(rank)]
    vals = member_conn(out, 'vals')
    vdtype = k.sdfg.arrays[vals].dtype
    sizes = [sympy.sympify(X.nvals) for X in operands]
    n = sum(sizes, sympy.Integer(0))
    tags = [[k.transient(f'sort{g}_t', [n], dace.int64)] if product else [] for g in (0, 1)]
    lists = [[k.transient(f'sort{g}_c{d}', [n], dace.int64) for d in range(rank)] +
             [k.transient(f'sort{g}_v', [n], vdtype)] + tags[g] for g in (0, 1)]
    st = k.add_state('sentinels')
    for d in range(rank):
        k.fill(st, lists[0][d], shape[d])
    offset = sympy.Integer(0)
    for j, X in enumerate(operands):
        slot = offset + X.pos
        more = [((lists[0][d], [slot]), e) for d, e in enumerate(X.coords)]
        if product:
            more.append(((lists[0][rank + 1], [slot]), j))
        k.compute(k.entries(k.add_state(f'list{j}'), X), (lists[0][rank], [slot]), X.value, guard=X.guard,
                  label=f'list{j}', more=more)
        offset = offset + sizes[j]
    src = 0
    for d in reversed(range(rank)):
        counting_sort(k, f'by{d}', n, lists[src][d], shape[d], list(zip(lists[src], lists[1 - src])))
        src = 1 - src
    cur = lists[src]
    head = f'while u_i < {pyexpr(n)}:\n    if _c0[u_i] == {pyexpr(shape[0])}:\n        break\n'
    write = ''.join(f'{{ind}}_o{d}[u_n] = _c{d}[u_i]\n' for d in range(rank))
    if product:
        same = ' and '.join(f'_c{d}[u_j] == _c{d}[u_i]' for d in range(rank))
        code = ('u_n = 0\nu_i = 0\n' + head +
                '    u_a = _v[u_i] * 0\n    u_b = u_a\n    u_ha = 0\n    u_hb = 0\n    u_j = u_i\n'
                f'    while u_j < {pyexpr(n)} and {same}:\n'
                '        if _t[u_j] == 0:\n            u_a = u_a + _v[u_j]\n            u_ha = 1\n'
                '        else:\n            u_b = u_b + _v[u_j]\n            u_hb = 1\n        u_j = u_j + 1\n'
                '    if u_ha == 1 and u_hb == 1:\n' + write.format(ind='        ') +
                '        _ov[u_n] = u_a * u_b\n        u_n = u_n + 1\n    u_i = u_j\n_p0 = 0\n_p1 = u_n\n')
    else:
        same = ' and '.join(f'_c{d}[u_i] == u_p{d}' for d in range(rank))
        code = ('u_n = 0\nu_i = 0\n' + ''.join(f'u_p{d} = -1\n' for d in range(rank)) + head +
                f'    if u_n > 0 and {same}:\n        _ov[u_n - 1] = _ov[u_n - 1] + _v[u_i]\n'
                '    else:\n' + ''.join(f'        u_p{d} = _c{d}[u_i]\n' for d in range(rank)) +
                write.format(ind='        ') +
                '        _ov[u_n] = _v[u_i]\n        u_n = u_n + 1\n    u_i = u_i + 1\n_p0 = 0\n_p1 = u_n\n')
    inputs = {f'_c{d}': cur[d] for d in range(rank)}
    inputs['_v'] = cur[rank]
    if product:
        inputs['_t'] = cur[rank + 1]
    outputs = {f'_o{d}': crds[d] for d in range(rank)}
    outputs.update({'_ov': vals, '_p0': f'{pos}[0]', '_p1': f'{pos}[1]'})
    tasklet(k, Scope.at(k.add_state('runs')), 'runs', code, inputs, outputs)


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
        keep, coords, values = list_entries(k, f'op{j}', A, vdtype, sign)
        at = compact(k, f'op{j}', keep, coords, values, n, out, base=f'{before}[{j}]')
        k.compute(Scope.at(k.add_state(f'before{j + 1}')), (before, [j + 1]), read(before, j) + read(at, n),
                  label=f'before{j + 1}')
    k.compute(Scope.at(k.add_state('count')), (pos, [0]), 0, label='count',
              more=[((pos, [1]), read(before, len(operands)))])


def list_entries(k: Kernel, label: str, X: Operand, vdtype, sign=1, flags: bool = True):
    """One parallel pass over ``X``'s entries writing, at each entry's value slot, its
    coordinates (int64 lists), its value times ``sign`` and, with ``flags``, 1 in a zeroed
    list where ``X``'s guard keeps the entry. Returns ``(flags or None, coordinate lists,
    values)``, each ``X.nvals`` long."""
    n = sympy.sympify(X.nvals)
    coords = [k.transient(f'{label}_c{d}', [n], dace.int64) for d in range(X.type.rank)]
    values = k.transient(f'{label}_v', [n], vdtype)
    more = [((c, [X.pos]), e) for c, e in zip(coords, X.coords)]
    if not flags:
        k.compute(k.entries(k.add_state(label), X), (values, [X.pos]), sign * X.value, guard=X.guard, label=label,
                  more=more)
        return None, coords, values
    keep = k.transient(f'{label}_keep', [n], dace.int64)
    k.fill(k.add_state(f'{label}_zero'), keep)
    k.compute(k.entries(k.add_state(label), X), (keep, [X.pos]), 1, guard=X.guard, label=label,
              more=more + [((values, [X.pos]), sign * X.value)])
    return keep, coords, values


def compact(k: Kernel, label: str, keep: str, coords, values: str, n, out: str, base: str = None) -> str:
    """The slots ``q < n`` of the lists ``coords`` / ``values`` where ``keep[q] != 0``, in order,
    moved into the ``PCOO<n>`` members of ``out`` from slot ``base`` on (one element, e.g.
    ``'before[1]'``; 0 when None): a prefix sum numbers them, a parallel pass moves each.
    Returns the prefix sums' array (its element ``n``: how many were moved)."""
    rank = len(coords)
    at = k.transient(f'{label}_at', [n + 1], dace.int64)
    scan(k, f'{label}_number', keep, at, n)
    q = f'__{label}_q'
    # the slot into a local first: DaCe 1.0.2 garbles an array read inside an output's index
    code = f'if _k != 0:\n    u_d = {"_b + " if base else ""}_at\n' + \
        ''.join(f'    _o{d}[u_d] = _c{d}\n' for d in range(rank)) + '    _ov[u_d] = _v\n'
    inputs = {'_k': f'{keep}[{q}]', '_at': f'{at}[{q}]', '_v': f'{values}[{q}]'}
    inputs.update({f'_c{d}': f'{coords[d]}[{q}]' for d in range(rank)})
    if base:
        inputs['_b'] = base
    outputs = {f'_o{d}': member_conn(out, f'crd{d + 1}') for d in range(rank)}
    outputs['_ov'] = member_conn(out, 'vals')
    tasklet(k, k.scope(k.add_state(f'{label}_move'), [(q, 0, n)], [dace.ScheduleType.Default]), f'{label}_move',
            code, inputs, outputs)
    return at


def validate_counted(node, sdfg, state, operands) -> None:
    """The checks of a node that writes a counted coordinate list ``out`` from sparse
    ``operands`` (prefixes) of one rank and shape: their members, a ``PCOO`` result of that
    rank and shape, of the operands' dtype (:mod:`sdfgsparse.ops.validation`)."""
    w = Wiring(node, sdfg, state)
    ops = [w.sparse(p) for p in operands]
    out = w.sparse('out', output=True)
    if out.stored is not None and not is_counted_coo(out.stored.fmt):
        w.fail(errors.FormatMismatchError, f'result {out.shown} is {out.stored.fmt.name}; the node writes a '
               'counted coordinate list (PCOO<n>)')
    first = ops[0]
    for x in ops[1:] + [out]:
        if x.seen is not None and first.seen is not None and x.seen.rank != first.seen.rank:
            w.fail(errors.ShapeError, f'{x.shown} has {x.seen.rank} dimensions, {first.shown} {first.seen.rank}')
    for sizes in zip(*(x.dims() for x in ops + [out])):
        w.same(*sizes)
    w.computes(out, *ops)
    w.finish()


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
    a ``PCOO<n>`` tensor of the shape A is seen with, holding A's entries as seen (in walk
    order; with ``coalesce``, sorted by coordinates, equal ones summed)."""
    implementations = {'pure': ExpandSparseMaterialisePure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    ACCEPTS_VIEWS = True
    SPARSE_OUTPUTS = ('out', )

    coalesce = properties.Property(dtype=bool, default=False, desc='Sort the entries by coordinates and sum those '
                                   'of equal coordinates (a function of the values needs them summed first)')

    def __init__(self, name='sparse_materialise', coalesce=False, *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.coalesce = coalesce

    def validate(self, sdfg, state):
        """A's members; a ``PCOO`` result of A's rank and shape (as A is seen), of A's dtype
        (:func:`validate_counted`)."""
        validate_counted(self, sdfg, state, ('A', ))
