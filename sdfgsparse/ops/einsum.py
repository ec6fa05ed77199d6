"""``np.einsum`` with one sparse operand (a tensor of any rank in any format) and dense
others: MTTKRP ``ijk,jr,kr->ir``, TTV ``ijk,k->ij``, TTM ``ijk,kr->ijr``, batched SpMM
``bij,bjk->bik``, axis sums ``ijk->i``.

The result is dense (:class:`SparseEinsum`), except where it is a matrix whose indices are
the sparse operand's two outer levels (``ijk,k->ij`` of a COO or CSF tensor: TTV, or
``ijk->ij``): :class:`~sdfgsparse.ops.einsum_sparse.SparsePrefixEinsum` then keeps it sparse.

The loop order follows the sparse operand (Scorch's rule for mixed sparse-dense
contractions: iterate sparse levels in storage order, never search a sparse level by a
dense index): the outer loops walk its stored entries level by level, the dense operands
and the result are indexed by the entry's coordinates and by the indices the sparse operand
does not have (loops inside the walk, in the order of the result's subscripts, then the
operands'). Every product is added into the result, so duplicates of a COO tensor are
summed as NumPy sums the dense tensor's entries.
"""
import string
from typing import Dict, List, NamedTuple, Sequence, Tuple

import dace
import dace.library
import sympy
from dace import dtypes, properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.lowering.graph import SUM, Kernel, read
from sdfgsparse.lowering.graph_dense import coordinate_binds, entry_maps
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.ops.validation import Size, Wiring

__all__ = ['EinsumNode', 'SparseEinsum', 'EinsumSpec', 'parse_spec', 'dense_conn', 'portable_kernel', 'walk_entries',
           'index_extents', 'result_shape', 'OUT']

OUT = '_out'
_LETTERS = set(string.ascii_letters)


def dense_conn(k: int) -> str:
    """The connector of the ``k``-th dense operand (in the subscripts' order, the sparse one
    left out)."""
    return f'_D{k}'


class EinsumSpec(NamedTuple):
    """A parsed contraction: each operand's subscripts, the result's, and the position of
    the sparse operand among the operands."""
    inputs: Tuple[str, ...]
    output: str
    sparse: int

    @property
    def text(self) -> str:
        return ','.join(self.inputs) + '->' + self.output

    @property
    def dense_inputs(self) -> Tuple[str, ...]:
        return tuple(s for k, s in enumerate(self.inputs) if k != self.sparse)

    @property
    def inner(self) -> Tuple[str, ...]:
        """The indices the sparse operand does not have: loops inside its walk (the result's
        first, then the dense operands', each once)."""
        seen = set(self.inputs[self.sparse])
        out = []
        for c in self.output + ''.join(self.dense_inputs):
            if c not in seen:
                seen.add(c)
                out.append(c)
        return tuple(out)


def parse_spec(subscripts: str, nops: int, sparse: int) -> EinsumSpec:
    """``subscripts`` (NumPy's einsum notation, explicit ``->`` or implicit: the result then
    holds the indices that appear once, in alphabetical order) for ``nops`` operands of
    which operand ``sparse`` is the sparse one. Unsupported: ``...``, an index repeated
    within one operand (a diagonal), an index of the result missing from the operands."""
    if not isinstance(subscripts, str):
        raise errors.ArgumentError(f'einsum: the subscripts must be a string, got {type(subscripts).__name__}')
    text = subscripts.replace(' ', '')
    if '.' in text:
        raise errors.UnsupportedOperationError(f'einsum {subscripts!r}: ellipses (...) are not supported with a '
                                               'sparse operand; name every index')
    lhs, arrow, rhs = text.partition('->')
    inputs = tuple(lhs.split(','))
    if len(inputs) != nops:
        raise errors.ArgumentError(f'einsum {subscripts!r}: {len(inputs)} operand subscripts for {nops} operands')
    for s in inputs + (rhs, ):
        bad = [c for c in s if c not in _LETTERS]
        if bad:
            raise errors.ArgumentError(f'einsum {subscripts!r}: {bad[0]!r} is not an index (use letters)')
        if len(set(s)) != len(s):
            raise errors.UnsupportedOperationError(f'einsum {subscripts!r}: an index repeats in {s!r} (a diagonal); '
                                                   'not supported with a sparse operand')
    if not arrow:
        counts = {}
        for c in ''.join(inputs):
            counts[c] = counts.get(c, 0) + 1
        rhs = ''.join(sorted(c for c, n in counts.items() if n == 1))
    missing = [c for c in rhs if c not in ''.join(inputs)]
    if missing:
        raise errors.ArgumentError(f'einsum {subscripts!r}: result index {missing[0]!r} is in no operand')
    return EinsumSpec(inputs, rhs, int(sparse))


def index_extents(spec: EinsumSpec, sparse_shape: Sequence, dense_shapes: Sequence[Sequence]) -> Dict[str, object]:
    """Each index's extent: the first operand that has it (the sparse one first). Whether
    the others agree is the caller's check."""
    ext = {}
    for c, size in zip(spec.inputs[spec.sparse], sparse_shape):
        ext.setdefault(c, size)
    for subs, shape in zip(spec.dense_inputs, dense_shapes):
        for c, size in zip(subs, shape):
            ext.setdefault(c, size)
    return ext


def result_shape(spec: EinsumSpec, ext: Dict[str, object]) -> List[object]:
    """The dense result's shape (one element for a full contraction)."""
    return [ext[c] for c in spec.output] or [1]


def portable_kernel(k: Kernel, node: 'SparseEinsum', state, atomics: bool = True) -> None:
    """``out = 0``, then :func:`walk_entries` adding every product into ``out[...]``: plain additions
    where the outer level's coordinates are unique and index the result (CSF's root, CSR's
    rows); elsewhere (COO's entries may share a result element) atomic ones in a parallel
    walk, or, without ``atomics``, plain ones in a sequential walk (a CPU's atomic addition
    of a double is a compare-and-swap loop: a COO tensor's MTTKRP took longer on two threads
    than on one)."""
    spec = node.parsed
    A = k.operand('A', node.operand_type(state, 'A'))
    k.fill(k.add_state('zero'), OUT)
    owner = A.type.fmt.outer_dim
    owned = owner is not None and spec.inputs[spec.sparse][owner] in spec.output
    walk_entries(k, node, A, lambda index: (OUT, [index[c] for c in spec.output] or [0]), owned,
          parallel=node.schedule_hint != 'sequential' and (owned or atomics))


def walk_entries(k: Kernel, node, A, target, owned: bool, parallel: bool) -> None:
    """Maps over A's stored entries (the outer level in ``parallel``; a compressed root, whose
    slices differ in size, with OpenMP's guided schedule), the coordinates that index dense data bound to map parameters (exact
    memlets), sequential maps over the indices A lacks (:attr:`EinsumSpec.inner`), and
    ``target(index) += value * D0[...] * ...`` as a write-conflict resolution, plain where
    ``owned`` (distinct iterations of the outer level write distinct elements)."""
    spec = node.parsed
    dense = [dense_conn(d) for d in range(len(spec.dense_inputs))]
    ext = index_extents(spec, A.type.shape, [k.sdfg.arrays[c].shape for c in dense])
    sparse_subs = spec.inputs[spec.sparse]
    coord = dict(zip(sparse_subs, A.coords))
    # coordinates that index a dense operand or the result, bound to parameters
    uses = [(f'__e_{c}', coord[c], arr, d) for arr, subs in [(OUT, spec.output)] + list(zip(dense, spec.dense_inputs))
            for d, c in enumerate(subs) if c in coord and arr in k.sdfg.arrays]
    binds, seen = [], set()
    for b in coordinate_binds(k, uses):
        if b[0] not in seen:
            seen.add(b[0])
            binds.append(b)
    state = k.add_state('einsum')
    sc, bound = entry_maps(k, state, A, parallel=parallel, binds=binds)
    if sc.entries and A.type.fmt.levels[0].kind == 'compressed':
        sc.entries[0].map.omp_schedule = dtypes.OMPScheduleType.Guided
    index = {c: bound.get(f'__e_{c}', coord[c]) for c in sparse_subs}
    if spec.inner:
        inner = [(f'__f_{c}', 0, ext[c]) for c in spec.inner]
        sc = k.scope(state, inner, [dtypes.ScheduleType.Sequential] * len(inner), outer=sc if sc.entries else None)
        index.update({c: sympy.Symbol(f'__f_{c}') for c in spec.inner})
    value = A.value
    for conn, subs in zip(dense, spec.dense_inputs):
        value = value * read(conn, *(index[c] for c in subs)) if subs else value * read(conn, 0)
    t = k.compute(sc, target(index), value, wcr=SUM, guard=A.guard, label='einsum')
    if parallel and owned:
        # distinct iterations of the outer level write distinct elements of the result, and
        # everything inside one iteration runs in sequence: plain additions
        for e in state.out_edges(t):
            for m in state.memlet_path(e):
                m.data.wcr_nonatomic = True


@dace.library.expansion
class ExpandSparseEinsumPure(ExpandTransformation):
    """The portable SDFG (:func:`portable_kernel`)."""
    environments = []

    @staticmethod
    def expansion(node: 'SparseEinsum', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


@properties.make_properties
class EinsumNode(SparseLibraryNode):
    """What both einsum nodes hold: the contraction ``spec`` (einsum notation, explicit
    ``->``), the position ``sparse`` of the sparse operand ``A`` (members ``_A_*``) among the
    operands, and the dense operands at ``_D0``, ``_D1``, ... (in the subscripts' order)."""
    SPARSE_INPUTS = ('A', )

    spec = properties.Property(dtype=str, default='i->i', desc='The contraction in einsum notation (explicit ->)')
    sparse = properties.Property(dtype=int, default=0, desc='The position of the sparse operand among the operands')

    def __init__(self, name, spec, sparse, outputs, *args, **kwargs):
        parsed = parse_spec(spec, spec.partition('->')[0].count(',') + 1, sparse)
        super().__init__(name, *args, inputs={dense_conn(d) for d in range(len(parsed.dense_inputs))},
                         outputs=outputs, **kwargs)
        self.spec = parsed.text
        self.sparse = parsed.sparse

    @property
    def parsed(self) -> EinsumSpec:
        return parse_spec(self.spec, self.spec.partition('->')[0].count(',') + 1, self.sparse)

    def _wiring(self, sdfg, state, result):
        """The checks both nodes share (:mod:`sdfgsparse.ops.validation`): the spec, the sparse
        operand's members (a tensor of its subscripts' rank), each dense operand of its
        subscripts' rank, every index of one extent wherever it appears (the result's too:
        ``result(w, spec, A)`` returns ``(result, [Size of each result dimension])``), the
        result of the operands' dtype. Returns the wiring, for the caller to finish."""
        w = Wiring(self, sdfg, state)
        try:
            spec = self.parsed
        except errors.SparseError as ex:
            w.fail(type(ex), str(ex))
        A = w.sparse('A')
        subs = spec.inputs[spec.sparse]
        dense = [w.dense(dense_conn(d), (max(len(s), 1), )) for d, s in enumerate(spec.dense_inputs)]
        if A.seen is not None and A.seen.rank != len(subs):
            w.fail(errors.ShapeError, f'the sparse operand {A.shown} has {A.seen.rank} dimensions, its subscripts '
                   f'{subs!r} {len(subs)}')
        out, out_sizes = result(w, spec, A)
        sizes: Dict[str, List[Size]] = {}
        if A.seen is not None:
            for d, c in enumerate(subs):
                sizes.setdefault(c, []).append(Size(A.seen.shape[d], f'dimension {d} ({c}) of {A.shown}'))
        for op, dsubs in zip(dense, spec.dense_inputs):
            for d, c in enumerate(dsubs):
                sizes.setdefault(c, []).append(op.dim(d))
        for c, size in zip(spec.output, out_sizes):
            sizes.setdefault(c, []).append(size)
        for group in sizes.values():
            w.same(*group)
        if dense:
            w.computes(out, A, *dense)
        else:
            w.computes(out, A, dtype=A.dtype)
        return w


@dace.library.node
class SparseEinsum(EinsumNode):
    """``out = np.einsum(spec, ...)`` into ``_out``, a dense array of the result's shape (one
    element for a full contraction); operands as :class:`EinsumNode`, the sparse one possibly
    a view (its walk is the stored data's, its coordinates the view's)."""
    implementations = {'pure': ExpandSparseEinsumPure}
    default_implementation = 'pure'
    ACCEPTS_VIEWS = True

    def __init__(self, name='sparse_einsum', spec='i->i', sparse=0, *args, **kwargs):
        super().__init__(name, spec, sparse, {OUT}, *args, **kwargs)

    def validate(self, sdfg, state):
        """:meth:`EinsumNode._wiring`, the result a dense array of the result's rank."""

        def result(w, spec, A):
            out = w.dense(OUT, (max(len(spec.output), 1), ), output=True)
            return out, [out.dim(d) for d in range(len(spec.output))]

        self._wiring(sdfg, state, result).finish()
