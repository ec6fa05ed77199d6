"""Element-wise functions of the stored values: ``alpha * A``, ``ss.relu(A)``, ``np.sqrt(A)`` ...

The result has A's pattern and format: the index arrays are copied, the values mapped.
Only functions with ``f(0) == 0`` keep the result equal to applying ``f`` to the whole
matrix; others (``ss.exp``) act on the stored values only, as documented.
"""
from typing import Tuple

import dace
import dace.library
import sympy
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse._symbolic import pyexpr
from sdfgsparse.lowering.epilogue import substitute
from sdfgsparse.lowering.graph import Kernel
from sdfgsparse.lowering.graph_values import copy_index_members as copy_members
from sdfgsparse.lowering.graph_values import map_value_slots
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse.ops.validation import Wiring

__all__ = ['portable_kernel', 'MapValues', 'FUNCTIONS', 'value_expression']

#: name -> (Python expression of ``v``, keeps zeros: f(0) == 0)
FUNCTIONS = {
    'scale': ('alpha * v', True),
    'neg': ('-v', True),
    'relu': ('max(0, v)', True),  # (DaCe's max(a, b) is a > b ? a : b: this order keeps NaN, as NumPy and torch)
    'abs': ('abs(v)', True),
    'sqrt': ('math.sqrt(v)', True),
    'sin': ('math.sin(v)', True),
    'tanh': ('math.tanh(v)', True),
    'square': ('v * v', True),
    'exp': ('math.exp(v)', False),
    'sigmoid': ('1 / (1 + math.exp(-v))', False),
    'spones': ('1', False),  # every stored entry 1: the pattern as a matrix (torch's sampled_addmm with beta=0)
}

ALPHA = '_alpha'


def value_expression(function: str, value_dtype: dace.typeclass, out_dtype: dace.typeclass) -> str:
    """The tasklet expression of ``function`` (:data:`FUNCTIONS`) of ``v``. An integer ``v``
    whose result is a float (``ss.sqrt`` of int32 values is float64, as in NumPy) is
    converted first: C's ``sqrt`` of an ``int`` is the integer square root's overload."""
    expr, _ = FUNCTIONS[function]
    if value_dtype.as_numpy_dtype().kind in 'biu' and out_dtype.as_numpy_dtype().kind == 'f':
        expr = substitute(expr, {'v': f'dace.{out_dtype.to_string()}(v)'})
    return expr


def alpha_spelling(alpha: str) -> Tuple[str, list]:
    """The tasklet spelling of a constant or symbolic scale factor and the names of its
    symbols. A factor that is not an integer is written with floating-point numbers
    (``1/N`` -> ``1.0/N``): tasklet division of integers truncates, as in C."""
    e = dace.symbolic.pystr_to_symbolic(alpha)
    names = sorted(str(s) for s in e.free_symbols)
    if e.is_integer is not True:
        e = sympy.N(sympy.Float(1.0, 17) * e, 17)
    return f'({pyexpr(e)})', names


def _constant_alpha(k: Kernel, alpha: str) -> str:
    """:func:`alpha_spelling`; its symbols become symbols of the kernel."""
    spelling, names = alpha_spelling(alpha)
    for s in names:
        if s not in k.sdfg.symbols:
            k.sdfg.add_symbol(s, k.parent.symbols.get(s, dace.int64))
    return spelling


@dace.library.expansion
class ExpandMapValuesPure(ExpandTransformation):
    """The portable SDFG: A's index members copied by parallel maps, and one parallel map
    over every value slot (padding slots of ELL and DIA included, as in the ``cpu``
    expansion) with a Python tasklet ``out[q] = f(A[q])``; the expression of
    :data:`FUNCTIONS` is used as written (``relu`` is ``max(0, v)``, which keeps NaN)."""
    environments = []

    @staticmethod
    def expansion(node: 'MapValues', state, sdfg):
        k = Kernel(node, state, sdfg)
        portable_kernel(k, node, state)
        return k.build()


def portable_kernel(k: Kernel, node: 'MapValues', state) -> None:
    """The steps of the portable expansion built into ``k`` (the ``cpu`` expansion builds
    them into its own kernel where it has no tuned walk)."""
    expr = value_expression(node.function, node.member_arrays(state, 'A')['vals'].dtype,
                            node.member_arrays(state, 'out')['vals'].dtype)
    inputs = {}
    if node.function == 'scale':
        if node.alpha_is_data:
            inputs['__alpha'] = (ALPHA, '0')
            expr = expr.replace('alpha', '__alpha')
        else:
            expr = expr.replace('alpha', _constant_alpha(k, node.alpha))
    st = k.add_state('map_values')
    copy_members(k, st, node.member_arrays(state, 'out'), 'A', 'out')
    map_value_slots(k, st, member_conn('A', 'vals'), member_conn('out', 'vals'), expr, inputs=inputs,
                    label=node.function)


@dace.library.node
class MapValues(SparseLibraryNode):
    """``out = f(A)`` on stored values (``function`` in :data:`FUNCTIONS`), A's pattern kept.

    Inputs: members of A (``_A_*``) and, for ``scale`` by a data value, ``_alpha``;
    outputs: members of the result (``_out_*``)."""
    implementations = {'pure': ExpandMapValuesPure}
    default_implementation = 'pure'
    SPARSE_INPUTS = ('A', )
    SPARSE_OUTPUTS = ('out', )

    function = properties.Property(dtype=str, default='scale', desc='Function applied to each stored value')
    alpha = properties.Property(dtype=str, default='1', desc='Scale factor (a constant or symbol expression)')
    alpha_is_data = properties.Property(dtype=bool, default=False, desc='The scale factor is the input _alpha')

    def __init__(self, name='map_values', function='scale', alpha='1', *args, **kwargs):
        if function not in FUNCTIONS:
            raise errors.UnsupportedOperationError(f'unknown element-wise function {function!r}; '
                                                   f'known: {", ".join(FUNCTIONS)}')
        super().__init__(name, *args, inputs=set(), outputs=set(), **kwargs)
        self.function = function
        self.alpha = str(alpha)

    def validate(self, sdfg, state):
        """A known ``function``, A's members, the result with A's pattern, and ``_alpha`` (any
        shape: its first element is read) exactly when ``alpha_is_data``
        (:mod:`sdfgsparse.ops.validation`)."""
        w = Wiring(self, sdfg, state)
        if self.function not in FUNCTIONS:
            w.fail(errors.UnsupportedOperationError, f'unknown element-wise function {self.function!r}; known: '
                   f'{", ".join(FUNCTIONS)}')
        A, out = w.sparse('A'), w.sparse('out', output=True)
        w.dense(ALPHA, required=self.alpha_is_data)
        w.same_pattern(out, A)
        w.finish()
