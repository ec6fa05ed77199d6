"""A sparse SDFG turned into an FPGA SDFG (DaCe's Xilinx code generator).

:func:`to_fpga` (in place):

1. every sparse library node is expanded with its portable ``'pure'`` SDFG
   (:func:`sdfgsparse.targets.expand_sparse_nodes`), which DaCe's FPGA transformations
   can see into;
2. the sparse arguments are flattened (:func:`flatten_sparse_arguments`): a structure
   argument ``A`` whose members the program reads through views (``A_pos1``, ``A_crd1``,
   ``A_vals``) becomes those member arrays, each an argument of its own. DaCe 1.0.2's
   FPGA transformation cannot copy a structure to the device (``FPGATransformSDFG`` left
   member memlets naming arrays that no longer exist), and a kernel argument is a flat
   array in device memory anyway;
3. ``SDFG.apply_fpga_transformations()``: the host arrays are copied to and from FPGA
   global memory around one state of kernels.

The lowered SDFG records what the flattening did (:func:`flat_arguments`: argument ->
member -> the array that now stands for it), which the call path
(:class:`~sdfgsparse.runtime.call.CompiledProgram`) fills from the caller's sparse matrix.
Sparse intermediates and sparse results are not lowered yet (a named error).
"""
from typing import Dict, List

import dace

from sdfgsparse import errors
from sdfgsparse.targets import expand_sparse_nodes

__all__ = ['to_fpga', 'flatten_sparse_arguments', 'flat_arguments', 'is_lowered']

_FLAT = '_ss_fpga_flat'


def flatten_sparse_arguments(sdfg: dace.SDFG) -> Dict[str, Dict[str, str]]:
    """Replace each structure argument of ``sdfg`` by the member arrays its views read
    (see the module; the views of one member become one array); returns argument ->
    member -> array name. A structure used in any
    other way (a member read without a view, passed whole to a nested SDFG, written)
    raises :class:`~sdfgsparse.errors.UnsupportedOperationError` naming it."""
    flat: Dict[str, Dict[str, str]] = {}
    for name, desc in list(sdfg.arrays.items()):
        if not isinstance(desc, dace.data.Structure) or desc.transient:
            continue
        members: Dict[str, List[str]] = {}
        views = set()
        for state in sdfg.states():
            for node in [n for n in state.data_nodes() if n.data == name]:
                if state.in_degree(node):
                    what = 'return sparse results' if name.startswith('__return') else f'write the sparse argument {name}'
                    raise errors.UnsupportedOperationError(f'{sdfg.name}: the FPGA target cannot {what} yet (its '
                                                           'programs read sparse arguments and write dense results)')
                for e in state.out_edges(node):
                    view = e.dst
                    vdesc = sdfg.arrays.get(getattr(view, 'data', None))
                    member = (e.data.data or '').split('.', 1)[-1] if e.data.data else ''
                    if not isinstance(vdesc, dace.data.View) or e.data.data != f'{name}.{member}' \
                            or member not in desc.members:
                        raise errors.UnsupportedOperationError(
                            f'{sdfg.name}: the FPGA target reads sparse arguments through member views only; '
                            f'{name} is also read as {e.data} by {view}')
                    if view.data not in members.setdefault(member, []):
                        members[member].append(view.data)
                    views.add(view.data)
        for state in sdfg.states():
            for node in [n for n in state.data_nodes() if n.data == name]:
                for e in list(state.out_edges(node)):
                    state.remove_edge(e)
                    if e.dst_conn:
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
            sdfg.arrays[vs[0]] = dace.data.Array(vd.dtype, vd.shape, transient=False, strides=vd.strides,
                                                 total_size=vd.total_size)
        del sdfg.arrays[name]
        flat[name] = {m: vs[0] for m, vs in members.items()}
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
    return hasattr(sdfg, _FLAT)


def to_fpga(sdfg: dace.SDFG) -> dace.SDFG:
    """Lower ``sdfg`` for the FPGA, in place (see the module); returns it."""
    if is_lowered(sdfg):
        return sdfg
    expand_sparse_nodes(sdfg, 'FPGA')
    sdfg.simplify()
    for sd in sdfg.all_sdfgs_recursive():
        bad = [n for n, d in sd.arrays.items() if isinstance(d, dace.data.Structure) and (d.transient or sd is not sdfg)]
        if bad:
            raise errors.UnsupportedOperationError(
                f'{sdfg.name}: the FPGA target does not take sparse intermediates or sparse results yet '
                f'({", ".join(bad)} in {sd.name}); its programs read sparse arguments and write dense results')
    flat = flatten_sparse_arguments(sdfg)
    sdfg.validate()
    compute = [st for st in sdfg.states() if st.nodes()]
    if len(compute) == 1 and not any(isinstance(d, dace.data.Stream) for d in sdfg.arrays.values()):
        kernel_state(sdfg, compute[0])
    else:  # DaCe's own: nests the SDFG into one state first
        sdfg.apply_fpga_transformations(validate=False)
    sdfg.validate()
    setattr(sdfg, _FLAT, flat)
    return sdfg


def kernel_state(sdfg: dace.SDFG, state: dace.SDFGState) -> None:
    """Make ``state`` one FPGA kernel: every argument array it accesses gets a twin in FPGA
    global memory (``fpga_<name>``), copied in before the state (all of them: an output
    the kernel accumulates into starts from its content) and out after it (those it
    writes); transients become FPGA global (outside maps) or local memory, maps FPGA
    schedules (DaCe's ``fpga_update``).

    What DaCe's ``FPGATransformState`` does, without its search for outputs written with
    a write-conflict resolution, which in 1.0.2 adds a copy to the twin of an internal
    transient it never creates ("Array fpga___tmp1 not found": a sparse product feeding
    an element-wise epilogue)."""
    from dace import dtypes, memlet, subsets
    from dace.transformation.interstate.fpga_transform_state import fpga_update
    accessed = {}
    for node in state.data_nodes():
        desc = sdfg.arrays[node.data]
        if not desc.transient and isinstance(desc, dace.data.Array) and not isinstance(desc, dace.data.View):
            accessed.setdefault(node.data, []).append(node)
    written = {n for n, ns in accessed.items() if any(state.in_degree(x) for x in ns)}
    for name in accessed:
        desc = sdfg.arrays[name]
        sdfg.add_array('fpga_' + name, desc.shape, desc.dtype, transient=True, storage=dtypes.StorageType.FPGA_Global,
                       strides=desc.strides, offset=desc.offset, total_size=desc.total_size,
                       allow_conflicts=desc.allow_conflicts)
    pre = sdfg.add_state_before(state, 'pre_' + state.label)
    for name in accessed:
        full = subsets.Range.from_array(sdfg.arrays[name])
        pre.add_edge(pre.add_read(name), None, pre.add_write('fpga_' + name), None, memlet.Memlet(data=name,
                                                                                                   subset=full))
    if written:
        post = sdfg.add_state_after(state, 'post_' + state.label)
        for name in written:
            full = subsets.Range.from_array(sdfg.arrays[name])
            post.add_edge(post.add_read('fpga_' + name), None, post.add_write(name), None,
                          memlet.Memlet(data='fpga_' + name, subset=full))
    for name, nodes in accessed.items():
        for node in nodes:
            node.data = 'fpga_' + name
    for e in state.edges():
        if e.data.data in accessed:
            e.data.data = 'fpga_' + e.data.data
    fpga_update(sdfg, state, 0)
