"""Shared match helper: a dense operand that is only the transpose of another array."""
from typing import Optional

from dace.libraries.standard.nodes.transpose import Transpose
from dace.sdfg import nodes

__all__ = ['absorbable_transpose']


def absorbable_transpose(state, sdfg, edge) -> Optional[Transpose]:
    """The ``Transpose`` node that alone makes the data read by ``edge`` (a transient read
    once, written once, nowhere else in the SDFG, from a whole 2-D array), or None. A node
    that can read the original by rows may take the transpose's input instead."""
    y = edge.src
    if not isinstance(y, nodes.AccessNode) or not sdfg.arrays[y.data].transient:
        return None
    if state.in_degree(y) != 1 or state.out_degree(y) != 1:
        return None
    if any(n.data == y.data for s in sdfg.states() for n in s.data_nodes() if n is not y):
        return None
    tr = state.in_edges(y)[0].src
    if not isinstance(tr, Transpose) or state.in_degree(tr) != 1 or state.out_degree(tr) != 1:
        return None
    k = state.in_edges(tr)[0]
    kdesc = sdfg.arrays[k.data.data]
    if len(kdesc.shape) != 2 or k.data.subset.num_elements() != kdesc.total_size:
        return None
    return tr
