"""Element-wise functions of the stored values: ``alpha * A``, ``ss.relu(A)``, ``np.sqrt(A)`` ...

The result has A's pattern and format: the index arrays are copied, the values mapped.
Only functions with ``f(0) == 0`` keep the result equal to applying ``f`` to the whole
matrix; others (``ss.exp``) act on the stored values only, as documented.
"""
import math

import dace
import dace.library
from dace import properties
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse import errors
from sdfgsparse.targets.cpu.entries import copy_index_members, kernel_for_node
from sdfgsparse.ops.base import SparseLibraryNode, member_conn
from sdfgsparse._symbolic import pyexpr

__all__ = ['MapValues', 'FUNCTIONS']

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
}

ALPHA = '_alpha'


@dace.library.expansion
class ExpandMapValuesCPU(ExpandTransformation):
    """A parallel map over stored values; index arrays copied by parallel maps."""
    environments = []

    @staticmethod
    def expansion(node: 'MapValues', state, sdfg):
        kb = kernel_for_node(node, state, sdfg)
        members = node.member_arrays(state, 'A')
        out = node.member_arrays(state, 'out')
        expr, _ = FUNCTIONS[node.function]
        if node.function == 'scale':
            expr = expr.replace('alpha', ALPHA if node.alpha_is_data else f'({node.alpha})')
        kb.globals['math'] = math
        T = kb.dtype(out['vals'].dtype)
        copy_index_members(kb, members, 'A', 'out')
        kb.line(f'for q in dace.map[0:{pyexpr(members["vals"].shape[0])}]:')
        kb.line(f'    v = {member_conn("A", "vals")}[q]')
        kb.line(f'    {member_conn("out", "vals")}[q] = {T}({expr})')
        return kb.build()


@dace.library.node
class MapValues(SparseLibraryNode):
    """``out = f(A)`` on stored values (``function`` in :data:`FUNCTIONS`), A's pattern kept.

    Inputs: members of A (``_A_*``) and, for ``scale`` by a data value, ``_alpha``;
    outputs: members of the result (``_out_*``)."""
    implementations = {'cpu': ExpandMapValuesCPU}
    default_implementation = 'cpu'
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
