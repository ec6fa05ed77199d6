"""A sparse SDFG turned into a GPU SDFG.

:func:`to_gpu` (in place):

1. every sparse library node (:class:`~sdfgsparse.ops.base.SparseLibraryNode`) is
   expanded with its ``cuda`` implementation (:mod:`sdfgsparse.targets.cuda.expansions`:
   the level walk's maps, loops and tasklets, which DaCe's GPU transformation can see
   into), or its portable ``'pure'`` one where it has none. A node with neither raises
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
from typing import Dict, List, Tuple

import dace
from dace import dtypes
from dace.transformation.interstate import GPUTransformSDFG

from sdfgsparse._dace_compat import wrap
from sdfgsparse import errors

__all__ = ['to_gpu', 'is_lowered', 'LEAF_EXPANSIONS', 'expand_sparse_nodes', 'arguments_on_device',
           'structures_of_device_arrays', 'host_accesses', 'device_twins', 'copy_twins', 'device_storage_inward',
           'with_cpu_schedules', 'PORTABLE']

# the expansion of every sparse node, shared with the FPGA target (sdfgsparse.targets)
from sdfgsparse.targets import PORTABLE, expand_sparse_nodes  # noqa: E402
from sdfgsparse.targets.cuda.expansions import IMPLEMENTATION  # noqa: E402 (registers the cuda implementations)
from sdfgsparse.targets.cuda.spmv import ExpandSpMVCUDA  # noqa: E402 (registers SpMV's over the generic one)
from sdfgsparse.targets.cuda.spmm import ExpandSpMMCUDA  # noqa: E402 (registers SpMM's over the generic one)
from sdfgsparse.targets.cuda.sddmm import ExpandSDDMMCUDA  # noqa: E402 (registers SDDMM's over the generic one)

#: The ``cuda`` expansions whose kernels are leaves of ``include/*.cuh`` (where they apply);
#: every other node takes the generic level walk of :mod:`~sdfgsparse.targets.cuda.expansions`.
LEAF_EXPANSIONS = (ExpandSpMVCUDA, ExpandSpMMCUDA, ExpandSDDMMCUDA)


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


def structures_of_device_arrays(sdfg: dace.SDFG) -> List[str]:
    """Make every intermediate sparse result of ``sdfg`` (a transient structure, in any
    nested SDFG) a host struct of device arrays, as sparse arguments are; returns their
    names. DaCe's GPU transformation marks such a structure ``GPU_Global`` as a whole and
    leaves its members on the host; a struct in device memory cannot be read by the host
    code that passes member pointers to the kernels. ``_dace_compat`` patch 15 has the
    code generator of each member's storage allocate and free it (``cudaMalloc`` /
    ``cudaFree``)."""
    done = []
    for g in sdfg.all_sdfgs_recursive():
        for name, desc in g.arrays.items():
            if not (desc.transient and isinstance(desc, dace.data.Structure)) or isinstance(
                    desc, dace.data.StructureView):
                continue
            desc.storage = dtypes.StorageType.Default
            for member in desc.members.values():
                if isinstance(member, dace.data.Array):
                    member.storage = dtypes.StorageType.GPU_Global
            done.append(name)
    return done


def device_storage_inward(sdfg: dace.SDFG) -> int:
    """Give views of device arrays, and the arrays of nested SDFGs (expanded sparse
    nodes) that are connected to device arrays, ``GPU_Global`` storage, from the outside
    in; returns how many descriptors changed. Otherwise DaCe's GPU transformation treats
    the arguments of each expanded node as host arrays and copies them into new device
    arrays on every call (device-to-device copies of every sparse operand)."""
    changed = 0

    def device(g, data):
        desc = g.arrays[data] if data and data in g.arrays else None  # (.get misses 'A.member')
        return getattr(desc, 'storage', None) == dtypes.StorageType.GPU_Global

    for g in sdfg.all_sdfgs_recursive():  # parents before their nested SDFGs
        for state in g.states():
            for node in dace.sdfg.utils.dfs_topological_sort(state):
                if not isinstance(node, (dace.nodes.AccessNode, dace.nodes.NestedSDFG)):
                    continue
                if isinstance(node, dace.nodes.AccessNode):
                    desc = g.arrays[node.data]
                    if not isinstance(desc, dace.data.View) or desc.storage == dtypes.StorageType.GPU_Global:
                        continue
                    viewed = [e.data.data for e in state.in_edges(node) + state.out_edges(node)
                              if 'views' in (e.src_conn, e.dst_conn)]
                    if viewed and all(device(g, v) for v in viewed):
                        desc.storage = dtypes.StorageType.GPU_Global
                        changed += 1
                    continue
                for e in state.in_edges(node) + state.out_edges(node):
                    conn = e.dst_conn if e.dst is node else e.src_conn
                    inner = node.sdfg.arrays.get(conn)
                    if (isinstance(inner, dace.data.Array) and not inner.transient and device(g, e.data.data)
                            and inner.storage != dtypes.StorageType.GPU_Global):
                        inner.storage = dtypes.StorageType.GPU_Global
                        changed += 1
    return changed


def _on_device(desc) -> bool:
    return any(getattr(m, 'storage', None) == dtypes.StorageType.GPU_Global for m in desc.members.values())


def _copy_members(state: dace.SDFGState, src: str, dst: str) -> None:
    """Copy every array member of structure ``src`` into structure ``dst`` in ``state``,
    through one view per member on each side (``src --views--> v --copy--> w --views-->
    dst``, as sparse nodes read and write members), so that the whole structures are the
    accessed data: their allocation, lifetime and deallocation stay with them."""
    from sdfgsparse.ops.base import member_memlet
    sdfg = state.parent
    sdesc, ddesc = sdfg.arrays[src], sdfg.arrays[dst]
    snode, dnode = state.add_read(src), state.add_write(dst)
    for member, mdesc in sdesc.members.items():
        if not isinstance(mdesc, dace.data.Array):
            continue
        views = []
        for name, desc in ((src, mdesc), (dst, ddesc.members[member])):
            view, _ = sdfg.add_view(f'{name}_{member}_copy', desc.shape, desc.dtype, storage=desc.storage,
                                    find_new_name=True)
            views.append(state.add_access(view))
        state.add_edge(snode, None, views[0], 'views', member_memlet(src, member, mdesc))
        state.add_nedge(views[0], views[1], dace.Memlet.from_array(views[0].data, sdfg.arrays[views[0].data]))
        state.add_edge(views[1], 'views', dnode, None, member_memlet(dst, member, ddesc.members[member]))


def device_twins(sdfg: dace.SDFG) -> Dict[str, Tuple[str, bool, bool]]:
    """First half of DaCe's own ``apply_gpu_transformations()`` on a program whose sparse
    arguments are in host memory (:func:`install`): each such argument ``A``
    gets a device twin ``gpu_A`` (a host struct of device arrays, as
    :func:`structures_of_device_arrays` makes) and every use of ``A`` in ``sdfg`` is
    redirected to the twin. Returns ``{argument: (twin, read, written)}`` for
    :func:`copy_twins`. (DaCe's transformation would copy ``A`` into a structure in device
    memory, for which DaCe 1.0.2 generates member copies that do not compile.)"""
    twins = {}
    for name, desc in list(sdfg.arrays.items()):
        if desc.transient or not isinstance(desc, dace.data.Structure) or isinstance(
                desc, dace.data.StructureView) or _on_device(desc):
            continue
        twin = copy.deepcopy(desc)
        twin.transient = True
        twins[name] = sdfg.add_datadesc(f'gpu_{name}', twin, find_new_name=True)
    if not twins:
        return {}
    nodes = [(state, node) for state in sdfg.states() for node in state.data_nodes() if node.data in twins]
    read = {node.data for state, node in nodes if state.out_degree(node) > 0}
    written = {node.data for state, node in nodes if state.in_degree(node) > 0}
    sdfg.replace_dict(twins, replace_keys=False)
    structures_of_device_arrays(sdfg)
    return {name: (twin, name in read, name in written) for name, twin in twins.items()}


def copy_twins(sdfg: dace.SDFG, twins: Dict[str, Tuple[str, bool, bool]]) -> None:
    """Second half (after DaCe's transformation): a state before the program copies the
    members of every sparse argument it reads into the argument's twin, and a state
    after it copies the written twins back — DaCe's meaning of host arguments to a GPU
    program, copies in and out on every call. (Added after the transformation: its
    simplification would drop writes to a twin that nothing reads yet.)"""
    into = [(name, twin) for name, (twin, read, _) in twins.items() if read]
    back = [(twin, name) for name, (twin, _, written) in twins.items() if written]
    if into:
        first = sdfg.add_state_before(sdfg.start_state, 'sparse_copyin')
        for src, dst in into:
            _copy_members(first, src, dst)
    if back:
        sinks = sdfg.sink_nodes()
        last = sdfg.add_state('sparse_copyout')
        for sink in sinks:
            sdfg.add_edge(sink, last, dace.InterstateEdge())
        for src, dst in back:
            _copy_members(last, src, dst)


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


def host_accesses(sdfg: dace.SDFG) -> List[str]:
    """Where host code of a GPU SDFG would read or write device memory (which crashes or
    reads garbage on a GPU, and goes unnoticed on the CPU): a tasklet outside every GPU
    kernel with a memlet to a ``GPU_Global`` array, an interstate edge (a loop bound, a
    condition) reading one, or a kernel whose range is read from one. One line per place;
    empty when there is none."""
    from dace.sdfg.scope import is_devicelevel_gpu
    found = []

    def on_device(g, data):
        desc = g.arrays[data] if data and data in g.arrays else None  # (.get misses 'A.member')
        return getattr(desc, 'storage', None) == dtypes.StorageType.GPU_Global

    for g in sdfg.all_sdfgs_recursive():
        in_kernel = g.parent_nsdfg_node is not None and is_devicelevel_gpu(g.parent_sdfg, g.parent,
                                                                            g.parent_nsdfg_node)
        for e in ([] if in_kernel else g.all_interstate_edges()):
            for name in sorted(e.data.read_symbols()):
                if on_device(g, name):
                    found.append(f'{g.name}: the interstate edge {e.src.label} -> {e.dst.label} reads {name}')
        for state in g.states():
            for node in state.nodes():
                if isinstance(node, dace.nodes.Tasklet) and not is_devicelevel_gpu(g, state, node):
                    for e in state.in_edges(node) + state.out_edges(node):
                        if on_device(g, e.data.data):
                            found.append(f'{g.name}: the host tasklet {node.label} accesses {e.data.data}')
                elif isinstance(node, dace.nodes.MapEntry) and node.map.schedule in _GPU_SCHEDULES:
                    for e in state.in_edges(node):
                        if e.dst_conn and not e.dst_conn.startswith('IN_') and on_device(g, e.data.data):
                            found.append(f'{g.name}: the range of kernel {node.map.label} is read from {e.data.data}')
    return found


def to_gpu(sdfg: dace.SDFG, validate: bool = True) -> dace.SDFG:
    """Lower ``sdfg`` (in place) for the GPU target (see the module docstring); returns it.
    An SDFG that already runs on the GPU (:func:`is_lowered`) is returned as it is.

    :raises UnsupportedOperationError: a sparse node has neither a ``cuda`` nor a ``'pure'`` expansion.
    """
    if is_lowered(sdfg):
        return sdfg
    expand_sparse_nodes(sdfg, implementation=IMPLEMENTATION)
    moved = arguments_on_device(sdfg)
    structures_of_device_arrays(sdfg)
    device_storage_inward(sdfg)
    sdfg.apply_gpu_transformations(validate=False)
    for name in moved:  # sparse arguments: host structs of device pointers (arguments_on_device)
        if isinstance(sdfg.arrays[name], dace.data.Structure):
            sdfg.arrays[name].storage = dtypes.StorageType.Default
    structures_of_device_arrays(sdfg)
    if validate:
        sdfg.validate()
        wrong = host_accesses(sdfg)
        if wrong:
            raise errors.UnsupportedOperationError(f'{sdfg.name}: the GPU program would access device memory from '
                                                   'host code: ' + '; '.join(wrong))
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


def install() -> None:
    """Make DaCe's ``GPUTransformSDFG`` (what ``SDFG.apply_gpu_transformations()`` applies)
    handle sparse data; once.

    DaCe 1.0.2's transformation left the sparse library nodes to expand with their CPU
    kernels (C++ loops run by the host over device memory) and copied each sparse argument
    into a structure in device memory, whose member copies DaCe generates as code that does
    not compile (``gpu_A[__idx].vals``). Before the transformation, the sparse nodes now take
    their ``cuda`` expansion and each host sparse argument gets a device twin (a host struct
    of device arrays, :func:`device_twins`); after it, states copy the members in and (when
    written) out (:func:`copy_twins`), and intermediate sparse results become host structs
    of device arrays (:func:`structures_of_device_arrays`). Programs without sparse data are
    untouched."""

    def make(orig):

        def apply(self, graph, sdfg):
            sparse = any(isinstance(d, dace.data.Structure) for g in sdfg.all_sdfgs_recursive()
                         for d in g.arrays.values())
            if not sparse:
                return orig(self, graph, sdfg)
            expand_sparse_nodes(sdfg, implementation=IMPLEMENTATION)
            twins = device_twins(sdfg)
            device_storage_inward(sdfg)
            simplify, self.simplify = self.simplify, False  # it would drop writes to twins not yet copied out
            try:
                result = orig(self, graph, sdfg)
            finally:
                self.simplify = simplify
            copy_twins(sdfg, twins)
            if simplify:
                sdfg.simplify()
            structures_of_device_arrays(sdfg)
            return result

        return apply

    wrap(GPUTransformSDFG, 'apply', make)
