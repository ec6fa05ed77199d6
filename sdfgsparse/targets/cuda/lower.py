"""A sparse SDFG turned into a GPU SDFG.

:func:`to_gpu` (in place):

1. every sparse library node (:class:`~sdfgsparse.ops.base.SparseLibraryNode`) is
   expanded with its ``'pure'`` implementation — the portable SDFG of maps, loops and
   tasklets that DaCe's GPU transformation can see into (DESIGN: every node has one;
   target implementations are tested against it). A node without one raises
   :class:`~sdfgsparse.errors.UnsupportedOperationError` naming it. Nested sparse nodes
   that an expansion produces are expanded too. DaCe's own library nodes (``MatMul``,
   ``Reduce``, ...) stay: DaCe expands them at code generation for the GPU schedule
   they are given;
2. the program's array arguments, and the member arrays of its sparse arguments, are
   placed in GPU global memory (:func:`arguments_on_device`): a GPU program reads and
   writes the caller's device arrays (torch CUDA tensors, CuPy arrays,
   :func:`~sdfgsparse.targets.cuda.device.to_device`) instead of copying host arrays in
   and out on every call; a host array passed to it is an error
   (:mod:`sdfgsparse.targets.cuda.device`). Scalars stay host values;
3. ``SDFG.apply_gpu_transformations()``: maps become GPU kernels, transients move to
   GPU memory.
"""
import copy
from typing import List

import dace
from dace import dtypes

from sdfgsparse import errors

__all__ = ['to_gpu', 'is_lowered', 'expand_sparse_nodes', 'arguments_on_device', 'with_cpu_schedules', 'PORTABLE']

#: The implementation every sparse library node has for any target.
PORTABLE = 'pure'
_MAX_ROUNDS = 32  # expansions nest a few levels; more means an expansion re-creates its node


def _sparse_nodes(sdfg: dace.SDFG):
    from sdfgsparse.ops.base import SparseLibraryNode
    return [(n, s) for n, s in sdfg.all_nodes_recursive()
            if isinstance(n, SparseLibraryNode) and isinstance(s, dace.SDFGState)]


def expand_sparse_nodes(sdfg: dace.SDFG) -> int:
    """Expand every sparse library node of ``sdfg`` (nested SDFGs included) with its
    ``'pure'`` implementation; returns how many were expanded. The nodes of the SDFG are
    all checked before any is expanded, so an unsupported node leaves ``sdfg`` unchanged
    (unless an expansion itself creates it)."""
    count = 0
    for _ in range(_MAX_ROUNDS):
        found = _sparse_nodes(sdfg)
        if not found:
            return count
        missing = [n for n, _ in found if PORTABLE not in type(n).implementations]
        if missing:
            node = missing[0]
            raise errors.UnsupportedOperationError(
                f'{node.label} ({type(node).__name__}) has no portable {PORTABLE!r} expansion, which the GPU target '
                f'needs (its implementations: {", ".join(sorted(type(node).implementations)) or "none"})')
        for node, state in found:
            node.implementation = PORTABLE
            node.expand(state.sdfg, state)
            count += 1
    raise errors.UnsupportedOperationError(f'{sdfg.name}: sparse library nodes still present after {_MAX_ROUNDS} '
                                           'rounds of expansion (an expansion re-creates its own node)')


def arguments_on_device(sdfg: dace.SDFG) -> List[str]:
    """Put the array arguments of ``sdfg`` (non-transient, not scalars, not views) and
    the members of its sparse arguments in GPU global memory; returns their names.

    A sparse argument (a ``Structure``) itself stays a host struct whose members point to
    device memory: the host code reads the member pointers and passes them to the kernels.
    (Marked ``GPU_Global`` only while :func:`to_gpu` runs DaCe's GPU transformation, which
    would otherwise copy it to the device member by member; DaCe 1.0.2 cannot generate
    code for a struct argument in device memory.)"""
    moved = []
    for name, desc in sdfg.arrays.items():
        if desc.transient or isinstance(desc, dace.data.View):
            continue
        if isinstance(desc, dace.data.Structure):
            for member in desc.members.values():
                if isinstance(member, dace.data.Array):
                    member.storage = dtypes.StorageType.GPU_Global
        elif not isinstance(desc, dace.data.Array):
            continue
        desc.storage = dtypes.StorageType.GPU_Global
        moved.append(name)
    return moved


_GPU_SCHEDULES = (dtypes.ScheduleType.GPU_Device, dtypes.ScheduleType.GPU_Default, dtypes.ScheduleType.GPU_Persistent)


def is_lowered(sdfg: dace.SDFG) -> bool:
    """Whether ``sdfg`` already runs on the GPU: a top-level map, library node or nested
    SDFG has a GPU schedule (made by :func:`to_gpu` or DaCe's GPU transformation)."""
    for state in sdfg.states():
        sdict = state.scope_dict()
        for node in state.nodes():
            if sdict[node] is None and isinstance(node, (dace.nodes.EntryNode, dace.nodes.LibraryNode,
                                                        dace.nodes.NestedSDFG)) and node.schedule in _GPU_SCHEDULES:
                return True
    return False


def to_gpu(sdfg: dace.SDFG, validate: bool = True) -> dace.SDFG:
    """Lower ``sdfg`` (in place) for the GPU target (see the module docstring); returns it.
    An SDFG that already runs on the GPU (:func:`is_lowered`) is returned as it is.

    :raises UnsupportedOperationError: a sparse node has no ``'pure'`` expansion.
    """
    if is_lowered(sdfg):
        return sdfg
    inner = [n for n, d in sdfg.arrays.items() if d.transient and isinstance(d, dace.data.Structure)
             and not n.endswith('_ssT')]  # (X.T aliases are views of arguments)
    if inner:
        raise errors.UnsupportedOperationError(
            f'{sdfg.name}: intermediate sparse results ({", ".join(sorted(inner))}) cannot be placed on the GPU yet '
            '(DaCe 1.0.2 allocates a structure of device arrays with its CPU code generator, which has no GPU '
            'storage); return them, or run the program on the CPU')
    expand_sparse_nodes(sdfg)
    moved = arguments_on_device(sdfg)
    sdfg.apply_gpu_transformations(validate=False)
    for name in moved:  # sparse arguments: host structs of device pointers (arguments_on_device)
        if isinstance(sdfg.arrays[name], dace.data.Structure):
            sdfg.arrays[name].storage = dtypes.StorageType.Default
    if validate:
        sdfg.validate()
    return sdfg


_CPU_SCHEDULE = {
    dtypes.ScheduleType.GPU_Device: dtypes.ScheduleType.Default,
    dtypes.ScheduleType.GPU_Default: dtypes.ScheduleType.Default,
    dtypes.ScheduleType.GPU_Persistent: dtypes.ScheduleType.Default,
    dtypes.ScheduleType.GPU_ThreadBlock: dtypes.ScheduleType.Sequential,
    dtypes.ScheduleType.GPU_ThreadBlock_Dynamic: dtypes.ScheduleType.Sequential,
}


def with_cpu_schedules(sdfg: dace.SDFG) -> dace.SDFG:
    """A copy of a GPU SDFG (made by :func:`to_gpu`) that runs on the CPU: every GPU
    schedule becomes the CPU's (kernels: parallel maps; thread-block maps: sequential),
    every GPU storage the CPU heap (copies between host and device arrays become host
    copies), DaCe library nodes given a GPU implementation take their default again.
    The graph — maps, loops, tasklets, memlets, write-conflict resolutions — is the GPU
    program's, so running it checks the GPU program's algorithm where there is no GPU."""
    cpu = copy.deepcopy(sdfg)
    for node, _ in cpu.all_nodes_recursive():
        if isinstance(node, (dace.nodes.EntryNode, dace.nodes.ExitNode)):
            node.map.schedule = _CPU_SCHEDULE.get(node.map.schedule, node.map.schedule)
        elif isinstance(node, (dace.nodes.LibraryNode, dace.nodes.NestedSDFG)):
            node.schedule = _CPU_SCHEDULE.get(node.schedule, node.schedule)
            if isinstance(node, dace.nodes.LibraryNode) and node.implementation and 'CUDA' in node.implementation:
                node.implementation = None
    for g in cpu.all_sdfgs_recursive():
        for desc in g.arrays.values():
            for d in [desc] + (list(desc.members.values()) if isinstance(desc, dace.data.Structure) else []):
                if isinstance(d, dace.data.Data) and d.storage in (dtypes.StorageType.GPU_Global, dtypes.StorageType.GPU_Shared,
                                 dtypes.StorageType.CPU_Pinned):
                    d.storage = dtypes.StorageType.Default
    return cpu
