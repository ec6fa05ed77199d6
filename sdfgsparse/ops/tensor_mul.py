"""``T * U`` of two sparse tensors of one shape (any rank other than 2; views of either): the
element-wise product, whose entries are the coordinates both hold (the intersection of the
patterns), each the product of the two tensors' values there (their duplicates summed
first), in a counted coordinate list (``PCOO<n>``, :mod:`sdfgsparse.formats.counted`).

Where one operand's walk meets its entries sorted and unique (a stored CSF tensor:
:func:`sorted_unique`), each entry of the other searches it (:func:`lookup_product`: a binary
search per entry, in parallel; the result holds at most the searching operand's entries).
Otherwise both operands' entries are sorted together by coordinates and each run of equal
coordinates that holds entries of both becomes one entry
(:func:`~sdfgsparse.ops.materialise.coalesce_entries`; at most ``T``'s entries)."""
import dace
import dace.library
from dace.transformation.transformation import ExpandTransformation

import sympy

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.graph import Kernel, Operand, Scope, read
from sdfgsparse.lowering.graph_compress import tasklet
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.materialise import coalesce_entries, compact, list_entries, validate_counted

__all__ = ['SparseTensorMul', 'portable_kernel', 'lookup_product', 'sorted_unique', 'walked_operand']


def sorted_unique(st) -> bool:
    """Whether the walk of sparse data of type ``st`` meets its entries in increasing
    lexicographic order of their coordinates, each coordinate once, at value slots ``0, 1,
    ...`` in that order: stored data (not a view) whose levels store the dimensions in order
    (``c0, c1, ...``), each level ordered and unique, no padding (CSF<n>, BatchedCSR)."""
    fmt = st.fmt
    return (not hasattr(fmt, 'steps') and len(fmt.levels) == st.rank
            and tuple(fmt.dims) == tuple(f'c{k}' for k in range(st.rank))
            and all(l.ordered and l.unique and not getattr(l, 'size_key', None) for l in fmt.levels))


def walked_operand(sta, stb) -> int:
    """Which operand's entries the product walks (0: A, 1: B); the other is searched where it is
    :func:`sorted_unique` (B first), else the two are sorted together (0). The result holds at
    most the walked operand's entries."""
    return 1 if not sorted_unique(stb) and sorted_unique(sta) else 0


def portable_kernel(k: Kernel, node: 'SparseTensorMul', state) -> None:
    """The product of ``A`` and ``B`` into ``out``: :func:`lookup_product` where one operand is
    :func:`sorted_unique`, else :func:`~sdfgsparse.ops.materialise.coalesce_entries`."""
    A = k.operand('A', node.operand_type(state, 'A'))
    B = k.operand('B', node.operand_type(state, 'B'))
    if sorted_unique(B.type):
        lookup_product(k, A, B, 'out')
    elif sorted_unique(A.type):
        lookup_product(k, B, A, 'out')
    else:
        coalesce_entries(k, [A, B], 'out', product=True)


def lookup_product(k: Kernel, A: Operand, B: Operand, out: str) -> None:
    """``A * B`` where ``B`` is :func:`sorted_unique`: ``B``'s coordinates listed by value slot
    (sorted), then, for each entry of ``A`` in parallel, a binary search of its coordinates
    among ``B``'s; a found one keeps ``a * b`` (``A``'s duplicates each times the same ``b``:
    their sum's product), numbered by a prefix sum and moved to its number, into the
    ``PCOO<n>`` members of ``out``."""
    rank = A.type.rank
    vdtype = k.sdfg.arrays[member_conn(out, 'vals')].dtype
    na, nb = sympy.sympify(A.nvals), sympy.sympify(B.nvals)
    _, bc, bv = list_entries(k, 'b_list', B, vdtype, flags=False)
    listed, ac, av = list_entries(k, 'a_list', A, vdtype)
    keep = k.transient('keep', [na], dace.int64)
    prod = k.transient('prod', [na], vdtype)

    def less(d):  # B's entry u_m before A's, from dimension d on
        here = f'_b{d}[u_m] < _a{d}'
        return here if d == rank - 1 else f'({here} or (_b{d}[u_m] == _a{d} and {less(d + 1)}))'

    found = ' and '.join(f'_b{d}[u_lo] == _a{d}' for d in range(rank))
    code = (f'_kk = 0\n_p = _x\nif _l != 0:\n    u_lo = 0\n    u_hi = {pyexpr(nb)}\n    while u_lo < u_hi:\n'
            f'        u_m = (u_lo + u_hi) // 2\n        if {less(0)}:\n            u_lo = u_m + 1\n'
            f'        else:\n            u_hi = u_m\n    if u_lo < {pyexpr(nb)}:\n        if {found}:\n'
            '            _kk = 1\n            _p = _x * _bv[u_lo]\n')
    q = '__lq'
    inputs = {'_l': f'{listed}[{q}]', '_x': f'{av}[{q}]', '_bv': bv}
    inputs.update({f'_a{d}': f'{ac[d]}[{q}]' for d in range(rank)})
    inputs.update({f'_b{d}': bc[d] for d in range(rank)})
    sc = k.scope(k.add_state('search'), [(q, 0, na)], [dace.ScheduleType.Default])
    tasklet(k, sc, 'search', code, inputs, {'_kk': f'{keep}[{q}]', '_p': f'{prod}[{q}]'})
    at = compact(k, 'found', keep, ac, prod, na, out)
    k.compute(Scope.at(k.add_state('count')), (member_conn(out, 'pos1'), [0]), 0, label='count',
              more=[((member_conn(out, 'pos1'), [1]), read(at, na))])


@dace.library.expansion
class ExpandSparseTensorMulPure(ExpandTransformation):
    """The portable SDFG (:func:`portable_kernel`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseTensorMul', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


@dace.library.node
class SparseTensorMul(SparseLibraryNode):
    """Members of ``A`` and ``B`` (sparse data of one shape, read through their views) ->
    members of ``out``, a ``PCOO<n>`` tensor holding ``A * B`` on the coordinates both hold."""
    implementations = {'pure': ExpandSparseTensorMulPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', 'B')
    ACCEPTS_VIEWS = True
    SPARSE_OUTPUTS = ('out', )

    def __init__(self, name='sparse_tensor_mul', *args, **kwargs):
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)

    def validate(self, sdfg, state):
        """A's and B's members, of one rank and shape, and a ``PCOO`` result of that shape
        (:func:`~sdfgsparse.ops.materialise.validate_counted`)."""
        validate_counted(self, sdfg, state, ('A', 'B'))
