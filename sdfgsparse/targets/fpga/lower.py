"""A sparse SDFG turned into an FPGA SDFG (DaCe's Xilinx code generator).

:func:`to_fpga` (in place):

1. a sparse argument in another format that a product reads is made CSR
   (:func:`convert_arguments`; the call path converts the caller's matrix);
2. every sparse library node but those that take a streaming design
   (:func:`.streaming.streamable`: CSR SpMV, SpMM, SDDMM) is expanded with its portable
   ``'pure'`` SDFG (:func:`sdfgsparse.targets.expand_sparse_nodes`);
3. the sparse arguments and results are flattened (:func:`flatten_sparse_arguments`): a
   structure argument ``A`` whose members the program reads through views (``A_pos1``, ``A_crd1``,
   ``A_vals``) becomes those member arrays, each an argument of its own. DaCe 1.0.2's
   FPGA transformation cannot copy a structure to the device (``FPGATransformSDFG`` left
   member memlets naming arrays that no longer exist), and a kernel argument is a flat
   array in device memory anyway;
4. when the program is one state of computations after simplification: it is split where
   a computation reads what another writes (:func:`split_by_dependencies`); each streamed
   node becomes its kernel (:func:`.streaming.stream_node`, pumped by the design's factor),
   each run of the other states one group of kernel states (:func:`kernel_states`: FPGA
   global twins of the host arrays, copied in before and out after). A program of several
   states (loops, branches) takes DaCe's ``apply_fpga_transformations`` on its ``pure``
   expansions instead: nothing streams there.

The lowered SDFG records what the flattening did (:func:`flat_arguments`: argument ->
member -> the array that now stands for it), which the call path
(:class:`~sdfgsparse.runtime.call.CompiledProgram`) fills from the caller's sparse matrix.
A sparse result (``__return...``) is flattened the same way: the call path allocates its
member arrays and rebuilds the scipy matrix; so is a sparse intermediate (``(A + B) @ x``),
into transient member arrays.
"""
import contextlib
import copy
import threading
from typing import Dict, List, Optional

import dace

from sdfgsparse import errors
from sdfgsparse._warnings import benign_dace_warnings
from sdfgsparse.lowering.graph_compress import sequential_scans
from sdfgsparse.targets import expand_sparse_nodes
from sdfgsparse.targets.fpga import streaming

__all__ = ['fpga_storage', 'to_fpga', 'flatten_sparse_arguments', 'flat_arguments', 'is_lowered', 'convert_arguments',
           'converted_arguments']

_FLAT = '_ss_fpga_flat'
_CONVERTED = '_ss_fpga_converted'


def flatten_sparse_arguments(sdfg: dace.SDFG) -> Dict[str, Dict[str, str]]:
    """Replace each structure argument and sparse result of ``sdfg`` by the member arrays
    its views read or write (see the module; the views of one member become one array);
    returns argument (or ``__return...``) -> member -> array name. A structure used in any
    other way (a member accessed without a view, a sparse argument written) raises
    :class:`~sdfgsparse.errors.UnsupportedOperationError` naming it."""
    for node, _ in sdfg.all_nodes_recursive():
        if getattr(node, 'views', None):
            raise errors.UnsupportedOperationError(
                f'{sdfg.name}: the FPGA target streams stored matrices; {node.label} reads a view (a slice) of '
                f'{", ".join(sorted(node.views))}: materialise it in the program (ss.convert) or slice outside it')
    flat: Dict[str, Dict[str, str]] = {}
    for name, desc in list(sdfg.arrays.items()):
        if not isinstance(desc, dace.data.Structure):
            continue
        result = name.startswith('__return') or desc.transient  # (an intermediate is written too)
        members: Dict[str, List[str]] = {}
        for state in sdfg.states():
            for node in [n for n in state.data_nodes() if n.data == name]:
                if state.in_degree(node) and not result:
                    raise errors.UnsupportedOperationError(f'{sdfg.name}: the FPGA target cannot write the sparse '
                                                           f'argument {name}')
                for e in state.in_edges(node) + state.out_edges(node):
                    view = e.src if e.dst is node else e.dst
                    vdesc = sdfg.arrays.get(getattr(view, 'data', None))
                    member = e.data.data.split('.', 1)[-1] if e.data.data else ''
                    if not isinstance(vdesc, dace.data.View) or e.data.data != f'{name}.{member}' \
                            or member not in desc.members:
                        raise errors.UnsupportedOperationError(
                            f'{sdfg.name}: the FPGA target accesses sparse data through member views only; '
                            f'{name} is also accessed as {e.data} by {view}')
                    if view.data not in members.setdefault(member, []):
                        members[member].append(view.data)
        for state in sdfg.states():
            for node in [n for n in state.data_nodes() if n.data == name]:
                for e in state.in_edges(node) + state.out_edges(node):
                    state.remove_edge(e)
                    if e.dst is node and e.src_conn:
                        e.src.remove_out_connector(e.src_conn)
                    elif e.src is node and e.dst_conn:
                        e.dst.remove_in_connector(e.dst_conn)
                state.remove_node(node)
        # one array per member: each operation reads the member through a view of its own
        # (A_pos1, A_pos1_0, ...), which would copy it to the device once per operation
        renamed = {v: vs[0] for vs in members.values() for v in vs[1:]}
        for state in sdfg.states():
            for node in state.data_nodes():
                node.data = renamed.get(node.data, node.data)
            for e in state.edges():
                if e.data.data in renamed:
                    e.data.data = renamed[e.data.data]
        for v in renamed:
            del sdfg.arrays[v]
        for vs in members.values():
            vd = sdfg.arrays[vs[0]]
            sdfg.arrays[vs[0]] = dace.data.Array(vd.dtype, vd.shape, transient=desc.transient, strides=vd.strides,
                                                 total_size=vd.total_size)
        del sdfg.arrays[name]
        if not desc.transient:  # (an intermediate is now its member arrays; a transposed view
            flat[name] = {m: vs[0] for m, vs in members.items()}  # nothing reads is gone)
    if flat:
        names = []
        for a in sdfg.arg_names:
            names.extend(flat[a].values() if a in flat else [a])
        sdfg.arg_names = [n for n in dict.fromkeys(names) if n in sdfg.arrays]
    return flat


def flat_arguments(sdfg: dace.SDFG) -> Dict[str, Dict[str, str]]:
    """What :func:`to_fpga` flattened in ``sdfg`` (empty for an SDFG it did not lower)."""
    return getattr(sdfg, _FLAT, {})


def is_lowered(sdfg: dace.SDFG) -> bool:
    """Whether ``sdfg`` is the lowering made by :func:`to_fpga` in this process."""
    return hasattr(sdfg, _FLAT)


#: Storage types that only an FPGA design has.
_FPGA_STORAGE = (dace.StorageType.FPGA_Global, dace.StorageType.FPGA_Local, dace.StorageType.FPGA_Registers,
                 dace.StorageType.FPGA_ShiftRegister)


def fpga_storage(sdfg: dace.SDFG) -> list:
    """Names of the data of ``sdfg`` (nested SDFGs included) in FPGA memory: a program
    lowered for the FPGA, also after a save and a load (which :func:`is_lowered` does not
    see)."""
    return sorted({name for g in sdfg.all_sdfgs_recursive() for name, d in g.arrays.items()
                   if d.storage in _FPGA_STORAGE})


def _top_sparse_nodes(sdfg: dace.SDFG) -> list:
    from sdfgsparse.ops.base import SparseLibraryNode
    return [(n, st) for st in sdfg.states() for n in st.nodes() if isinstance(n, SparseLibraryNode)]


#: Held while the lowering or the FPGA code generator runs: the code generator changes
#: process-wide state for its duration (DaCe's ``unique_functions`` configuration).
LOCK = threading.RLock()


@contextlib.contextmanager
def quiet():
    """Under :data:`LOCK`, a context in which DaCe's benign warnings
    (:data:`sdfgsparse._warnings.BENIGN`: memlets it cannot propagate exactly, sequential
    maps inside a kernel) are not shown."""
    with LOCK, benign_dace_warnings():
        yield


def to_fpga(sdfg: dace.SDFG, design: Optional[streaming.Design] = None) -> dace.SDFG:
    """Lower ``sdfg`` for the FPGA, in place (see the module); returns it. CSR products
    take the streaming ``design`` (:mod:`.streaming`; ``Design()`` when None)."""
    if is_lowered(sdfg):
        return sdfg
    with quiet(), sequential_scans():  # (prefix sums as pipelined loops)
        return _to_fpga(sdfg, design)


def _to_fpga(sdfg: dace.SDFG, design: Optional[streaming.Design]) -> dace.SDFG:
    design = design or streaming.Design()
    converted = convert_arguments(sdfg)
    streamed = [(n, st) for n, st in _top_sparse_nodes(sdfg) if streaming.streamable(n, st) is None]
    expand_sparse_nodes(sdfg, 'FPGA', keep=[n for n, _ in streamed])
    sdfg.simplify()
    compute = [st for st in sdfg.states() if st.nodes()]
    ours = len(compute) == 1 and not any(isinstance(d, dace.data.Stream) for d in sdfg.arrays.values())
    if streamed and not ours:  # (DaCe's transformation below cannot place a streaming kernel)
        expand_sparse_nodes(sdfg, 'FPGA')
        sdfg.simplify()
        compute, streamed = [st for st in sdfg.states() if st.nodes()], []
    for sd in sdfg.all_sdfgs_recursive():
        bad = [n for n, d in sd.arrays.items() if isinstance(d, dace.data.Structure) and sd is not sdfg]
        if bad:
            raise errors.UnsupportedOperationError(
                f'{sdfg.name}: the FPGA target takes sparse data in the program\'s own scope only ({", ".join(bad)} '
                f'in {sd.name})')
    flat = flatten_sparse_arguments(sdfg)
    sdfg.validate()
    if ours:
        kept = {id(n): n for n, _ in streamed}
        group: List[dace.SDFGState] = []
        for state in split_by_dependencies(sdfg, compute[0]):
            parts = _isolate(sdfg, state, [n for n in state.nodes() if id(n) in kept])
            for part in parts:
                node = next((n for n in part.nodes() if id(n) in kept), None)
                if node is None:
                    group.append(part)
                    continue
                if group:
                    kernel_states(sdfg, group)
                    group = []
                kernel = streaming.stream_node(sdfg, part, node, design)
                streaming.pump_multiply(sdfg, kernel)
        if group:
            kernel_states(sdfg, group)
    else:  # DaCe's own: nests the SDFG into one state first
        sdfg.apply_fpga_transformations(validate=False)
    sdfg.validate()
    setattr(sdfg, _FLAT, flat)
    setattr(sdfg, _CONVERTED, converted)
    return sdfg


def convert_arguments(sdfg: dace.SDFG) -> Dict[str, dace.data.Structure]:
    """Make CSR every sparse argument that a product (SpMV, SpMM) reads in another format
    and that only sparse nodes with dense results read: the streaming design walks CSR rows, which a COO,
    CSC, DCSR, BSR, ELL or DIA matrix does not store in that order. The call path converts
    the caller's matrix on the host (:func:`converted_arguments`); the other readers take
    their portable expansions of CSR. Returns argument -> its CSR structure."""
    from sdfgsparse.formats import get_format, is_sparse_desc, sparse_type_of
    from sdfgsparse.ops.base import change_argument_format, sparse_consumers
    from sdfgsparse.ops.spmm import SpMM
    from sdfgsparse.ops.spmv import SpMV
    done = {}
    for name in list(sdfg.arg_names):
        desc = sdfg.arrays.get(name)
        if desc is None or not is_sparse_desc(desc) or sparse_type_of(desc).fmt.name == 'CSR':
            continue
        readers = [r for st in sdfg.states() for r in sparse_consumers(st, name)]
        # (a reader with a sparse result may give it the argument's format: not converted)
        if any(p is None or n.SPARSE_OUTPUTS for n, p in readers) or any(
                st.in_degree(n) for st in sdfg.states() for n in st.data_nodes() if n.data == name):
            continue
        if any(isinstance(n, (SpMM, SpMV)) and p == 'A' and not n.transpose_A for n, p in readers):
            change_argument_format(sdfg, name, get_format('CSR'))
            done[name] = copy.deepcopy(sdfg.arrays[name])
    return done


def converted_arguments(sdfg: dace.SDFG) -> Dict[str, dace.data.Structure]:
    """What :func:`convert_arguments` made CSR in the lowered ``sdfg``: argument -> its
    CSR structure (empty for an SDFG it did not lower)."""
    return getattr(sdfg, _CONVERTED, {})


def _isolate(sdfg: dace.SDFG, state: dace.SDFGState, nodes: list) -> List[dace.SDFGState]:
    """Each of ``nodes`` (library nodes of ``state`` that neither reads what another
    computation of the state writes) moved into a state of its own before ``state``, with
    its operands' access nodes; returns the states in order (``state`` last, when anything
    is left in it)."""
    from dace.sdfg.graph import SubgraphView
    from dace.transformation.helpers import state_fission
    states = []
    for node in nodes:
        if len(_computations(state)) == 1:
            break
        part = {node} | {e.src for e in state.in_edges(node)} | {e.dst for e in state.out_edges(node)}
        states.append(state_fission(SubgraphView(state, list(part))))
    return states + [state]


def _computations(state: dace.SDFGState) -> list:
    scope = state.scope_dict()
    return [n for n in state.nodes() if scope[n] is None and not isinstance(n, (dace.nodes.AccessNode,
                                                                                dace.nodes.ExitNode))]


def _outputs(state: dace.SDFGState, node) -> list:
    last = state.exit_node(node) if isinstance(node, dace.nodes.EntryNode) else node
    return [e.dst for e in state.out_edges(last) if isinstance(e.dst, dace.nodes.AccessNode)]


def split_by_dependencies(sdfg: dace.SDFG, state: dace.SDFGState) -> List[dace.SDFGState]:
    """Split ``state`` into a sequence of states, the computations of each reading only
    data that earlier states wrote; returns the states in order.

    In an FPGA kernel every top-level computation of the state is a processing element and
    they all run at once (``#pragma HLS DATAFLOW``; threads in the C-simulation), so one
    that reads a result another writes to memory in the same state races with it: the
    C-simulation of ``(A + B) @ x`` read a half-written sum. (Streams between the elements
    would keep them concurrent: a later step.)"""
    from dace.sdfg.graph import SubgraphView
    from dace.transformation.helpers import state_fission
    states = [state]
    while True:
        comps = _computations(state)
        written = {}
        for c in comps:
            for a in _outputs(state, c):
                written.setdefault(a.data, set()).add(c)
        first = []
        for c in comps:
            reads = [e.src.data for e in state.in_edges(c) if isinstance(e.src, dace.nodes.AccessNode)]
            if not any(written.get(r, set()) - {c} for r in reads):
                first.append(c)
        if len(first) == len(comps) or not first:
            return states
        nodes = set()
        for c in first:
            nodes.update(state.scope_subgraph(c).nodes() if isinstance(c, dace.nodes.EntryNode) else [c])
            nodes.update(e.src for e in state.in_edges(c) if isinstance(e.src, dace.nodes.AccessNode))
            nodes.update(_outputs(state, c))
        before = state_fission(SubgraphView(state, list(nodes)))
        states.insert(len(states) - 1, before)


def kernel_states(sdfg: dace.SDFG, states: List[dace.SDFGState]) -> None:
    """Make each of ``states`` (consecutive) one FPGA kernel: every argument array they
    access gets a twin in FPGA global memory (``fpga_<name>``), copied in before the first
    (all of them, as an output the kernels accumulate into starts from its content, but a
    transient no earlier state accesses, which the kernels write first) and out
    after the last (those they write); transients become FPGA global (outside maps) or
    local memory, maps FPGA schedules (DaCe's ``fpga_update``).

    What DaCe's ``FPGATransformState`` does, without its search for outputs written with
    a write-conflict resolution, which in 1.0.2 adds a copy to the twin of an internal
    transient it never creates ("Array fpga___tmp1 not found": a sparse product feeding
    an element-wise epilogue)."""
    import networkx as nx
    from dace import dtypes, memlet, subsets
    from dace.transformation.interstate.fpga_transform_state import fpga_update
    outside = {n.data for st in sdfg.states() if st not in states for n in st.data_nodes()}
    accessed = {}
    for state in states:
        for node in state.data_nodes():
            desc = sdfg.arrays[node.data]
            if (not desc.transient or node.data in outside) and isinstance(desc, dace.data.Array) \
                    and not isinstance(desc, dace.data.View) and desc.storage != dace.StorageType.FPGA_Global:
                accessed.setdefault(node.data, []).append((state, node))
    written = {n for n, ns in accessed.items() if any(st.in_degree(x) for st, x in ns)}
    twin = {}
    for name in accessed:
        desc = sdfg.arrays[name]
        twin[name] = sdfg.add_array('fpga_' + name, desc.shape, desc.dtype, transient=True,
                                    storage=dtypes.StorageType.FPGA_Global, strides=desc.strides, offset=desc.offset,
                                    total_size=desc.total_size, allow_conflicts=desc.allow_conflicts,
                                    find_new_name=True)[0]
    # a transient that no earlier state touches is first written here: nothing to copy in
    # (its twin is written before it is read; a copy would move uninitialised memory)
    earlier = {n.data for st in nx.ancestors(sdfg.nx, states[0]) for n in st.data_nodes()}
    copied = [n for n in accessed if not sdfg.arrays[n].transient or n in earlier]
    pre = sdfg.add_state_before(states[0], 'pre_' + states[0].label)
    for name in copied:
        full = subsets.Range.from_array(sdfg.arrays[name])
        pre.add_edge(pre.add_read(name), None, pre.add_write(twin[name]), None, memlet.Memlet(data=name, subset=full))
    if written:
        post = sdfg.add_state_after(states[-1], 'post_' + states[-1].label)
        for name in written:
            full = subsets.Range.from_array(sdfg.arrays[name])
            post.add_edge(post.add_read(twin[name]), None, post.add_write(name), None,
                          memlet.Memlet(data=twin[name], subset=full))
    for name, nodes in accessed.items():
        for _, node in nodes:
            node.data = twin[name]
    for state in states:
        for e in state.edges():
            if e.data.data in accessed:
                e.data.data = twin[e.data.data]
        fpga_update(sdfg, state, 0)
