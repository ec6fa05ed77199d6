"""The ``cpu`` implementation of :class:`~sdfgsparse.ops.einsum.SparseEinsum`.

MTTKRP of a CSF tensor of rank 3 along its root mode (``ijk,jr,kr->ir``, in any letters and
operand order) is a parallel loop over the root slices (OpenMP's guided schedule: power-law
slices), each a call of ``mttkrp_csf3_slice`` of ``include/sdfgsparse_tensor.h`` (B's row
multiplied once per fiber, the rank dimension in vector loops). Every other contraction is the
walk of :func:`~sdfgsparse.ops.einsum.portable_kernel` in a cpu kernel: the outer level of the
sparse operand in parallel where its coordinates own slices of the result, else sequential (no
atomic additions).
"""
from typing import Optional, Tuple

import dace
import dace.library
from dace import dtypes
from dace.transformation.transformation import ExpandTransformation

from sdfgsparse.lowering.graph import local
from sdfgsparse.ops.einsum import OUT, SparseEinsum, dense_conn, portable_kernel
from sdfgsparse.targets.cpu.builder import CpuKernel, leaf
from sdfgsparse.targets.cpu.environment import SdfgsparseCPU
from sdfgsparse.targets.registry import register

__all__ = ['ExpandSparseEinsumCPU', 'mttkrp_operands']


def mttkrp_operands(node: SparseEinsum, state) -> Optional[Tuple[str, str]]:
    """``(B, C)``, the dense connectors indexed by the tensor's second and third mode, where
    the node is MTTKRP of a CSF tensor of rank 3 along its root mode with every operand of the
    tensor's floating dtype and rows contiguous (``mttkrp_csf3_slice`` applies); else None."""
    spec = node.parsed
    st = node.operand_type(state, 'A')
    if st.fmt.name != 'CSF3' or node.schedule_hint == 'sequential' or st.dtype not in (dace.float32, dace.float64):
        return None
    i, j, k = spec.inputs[spec.sparse]
    if len(spec.output) != 2 or spec.output[0] != i or len(spec.dense_inputs) != 2:
        return None
    r = spec.output[1]
    by = {subs: dense_conn(d) for d, subs in enumerate(spec.dense_inputs)}
    if set(by) != {j + r, k + r}:
        return None
    for conn in (by[j + r], by[k + r], OUT):
        desc = node.connected(state, conn)
        if desc.dtype != st.dtype or len(desc.shape) != 2 or str(desc.strides[1]) != '1':
            return None
    return by[j + r], by[k + r]


@dace.library.expansion
class ExpandSparseEinsumCPU(ExpandTransformation):
    """MTTKRP of a CSF tensor's root mode by slices (see the module); every other contraction
    the walk of :func:`~sdfgsparse.ops.einsum.portable_kernel`, without atomic additions."""
    environments = [SdfgsparseCPU]

    @staticmethod
    def expansion(node: SparseEinsum, state, sdfg):
        k = CpuKernel(node, state, sdfg)
        dense = mttkrp_operands(node, state)
        if dense is None:
            portable_kernel(k, node, state, atomics=False)
            return k.build()
        A = k.operand('A', node.operand_type(state, 'A'))
        b, c = (k.sdfg.arrays[d] for d in dense)
        out = k.sdfg.arrays[OUT]
        k.fill(k.add_state('zero'), OUT)
        root = A.levels[0]
        sc = k.scope(k.add_state('mttkrp'), [(str(root.var), root.begin, root.end)], [dtypes.ScheduleType.Default])
        sc.entries[0].map.omp_schedule = dtypes.OMPScheduleType.Guided
        lv = lambda hint, value: local(k, sc, hint, dace.int64, value)  # noqa: E731
        conns = A.conns
        leaf(k, sc, 'mttkrp_slice',
             f'sdfgsparse::mttkrp_csf3_slice<{A.type.dtype.ctype}>(_tp0, _tpos1, _tcrd1, _tpos2, _tcrd2, _tv, _tb, '
             '_tldb, _tc, _tldc, _to + _ti * _tldo, _tr);',
             arrays={'_tpos1': conns['pos1'], '_tcrd1': conns['crd1'], '_tpos2': conns['pos2'],
                     '_tcrd2': conns['crd2'], '_tv': conns['vals'], '_tb': dense[0], '_tc': dense[1]},
             scalars={'_ti': root.coord},
             locals_in={'_tp0': lv('p0', root.var),
                        '_tldb': lv('ldb', b.strides[0]), '_tldc': lv('ldc', c.strides[0]),
                        '_tldo': lv('ldo', out.strides[0]), '_tr': lv('r', out.shape[1])},
             outs={'_to': (OUT, None)})
        return k.build()


register(SparseEinsum, 'cpu', ExpandSparseEinsumCPU, default=True)
