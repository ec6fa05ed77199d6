"""``DistributeSparseProducts``: a program's sparse products and reductions made ready to
run on every process of an MPI communicator, each on its own rows.

The program is the same on every process; only the sizes change: the size symbol of the
distributed matrices' rows and columns (``N`` of ``ss.CSR[dace.float64, N, N]``) becomes
the number of rows this process owns, so element-wise work stays local. Two kinds of node
need the other processes, and this pass replaces them by calls out of the compiled
program (DaCe callbacks, symbols of type ``dace.callback``) that the caller binds at run
time (:mod:`sdfgsparse.distributed.program` binds them to the halo exchange and to
``MPI_Allreduce``):

* every ``A @ x`` / ``A @ X`` (SpMV, SpMM) of a distributed matrix ``A`` becomes
  ``__ss_product_<i>(x, y)``: the exchange of ``x``'s needed entries, the local product,
  the fold of partial rows;
* every reduction over the distributed dimension (``np.dot``, ``x @ y`` of vectors,
  ``np.sum`` / ``np.max`` / ``np.min`` over it, ``X.T @ Y``) keeps its local part and
  passes it through ``__ss_allreduce_<i>`` (sum, max or min over the processes).

The matrix itself leaves the program's arguments (the product callbacks hold it).

Applicable to programs whose distributed matrices are square with one size symbol for rows
and columns and are used only in products ``A @ x`` / ``A @ X`` at the top level of the
program (not inside a map or a nested program); a library node whose inputs have the
distributed size and whose output has not (``Dot``, ``MatMul`` such as ``X.T @ Y``,
``Reduce``) is a reduction over the rows. Anything else raises
``UnsupportedOperationError`` before the SDFG is touched. What it cannot see: explicit loops or maps that sum over the
distributed dimension by hand, or indexing by global position (their results would be
local); the program's documentation must avoid them.

Properties:

* ``matrices``: names of the sparse arguments to distribute (empty: every sparse argument).

Returns ``{'products': {callback: (matrix, 'spmv' | 'spmm')}, 'reductions': {callback:
'sum' | 'max' | 'min'}, 'symbol': the distributed size symbol}``.
"""
from typing import Any, Dict, List, Optional, Tuple

import re

import dace
from dace import nodes, properties
from dace.libraries.blas.nodes.dot import Dot
from dace.libraries.blas.nodes.matmul import MatMul
from dace.libraries.standard.nodes.reduce import Reduce
from dace.sdfg.state import LoopRegion
from dace.transformation import pass_pipeline as ppl

from sdfgsparse.errors import UnsupportedOperationError
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.ops.spmv import SpMV

__all__ = ['DistributeSparseProducts']

PRODUCT_PREFIX = '__ss_product_'
ALLREDUCE_PREFIX = '__ss_allreduce_'


def _structure_of(state, edge) -> Tuple[Optional[str], List[nodes.AccessNode]]:
    """The non-transient structure an input edge of a sparse node reads (through views),
    and the access nodes on the way."""
    sdfg = state.sdfg
    chain, node = [], edge.src
    while isinstance(node, nodes.AccessNode):
        chain.append(node)
        desc = sdfg.arrays[node.data]
        if isinstance(desc, dace.data.Structure) and not desc.transient:
            return node.data, chain
        preds = state.in_edges(node)
        if len(preds) != 1:
            return None, chain
        node = preds[0].src
    return None, chain


def _whole(sdfg: dace.SDFG, memlet, what: str) -> None:
    """Refuse a memlet that is not its whole array (the callbacks take whole arrays)."""
    desc = sdfg.arrays[memlet.data]
    if memlet.subset is not None and memlet.subset != dace.subsets.Range.from_array(desc):
        raise UnsupportedOperationError(f'DistributeSparseProducts: {what} reads or writes part of '
                                        f'{memlet.data} ([{memlet.subset}]); a distributed product or reduction '
                                        'takes whole arrays (assign it to a new name first)')


def _reduction_op(node) -> Optional[str]:
    if isinstance(node, (Dot, MatMul)):
        return 'sum'
    wcr = (node.wcr or '').replace(' ', '')
    if wcr.endswith('x+y'):
        return 'sum'
    if 'max(' in wcr:
        return 'max'
    if 'min(' in wcr:
        return 'min'
    return None


def _mentions(code: str, sym: str) -> bool:
    return re.search(rf'\b{re.escape(sym)}\b', code or '') is not None


def _check_local(sdfg: dace.SDFG, sym: str, matrices) -> None:
    """Refuse what would compute differently on a process's rows than on the whole: the
    size symbol used as a value or in a loop or branch, a distributed array read at fixed
    or shifted positions (a stencil), reductions by hand or in nested programs, and sizes
    built from the symbol."""
    def refuse(what):
        raise UnsupportedOperationError(f'DistributeSparseProducts: {what}; a distributed program may use the '
                                        f'distributed size {sym} only as the extent of arrays and of maps over '
                                        f'their rows (0:{sym})')

    def the_matrix(name, desc):  # a distributed matrix or one of its members' views
        return isinstance(desc, dace.data.Structure) or (
            isinstance(desc, dace.data.View) and any(name.startswith(f'{m}_') for m in matrices))

    distributed = set()
    for nsdfg in sdfg.all_sdfgs_recursive():
        for name, desc in nsdfg.arrays.items():
            if the_matrix(name, desc):
                continue
            dims = [dace.symbolic.pystr_to_symbolic(str(d)) for d in getattr(desc, 'shape', ())]
            for axis, d in enumerate(dims):
                if sym in {str(f) for f in getattr(d, 'free_symbols', ())}:
                    if str(d) != sym:
                        refuse(f'{name} has the size {d}')
                    if axis and not desc.transient and nsdfg is sdfg:
                        refuse(f'the argument {name} has the distributed size in dimension {axis}')
                    distributed.add((id(nsdfg), name, axis))
    for nsdfg in sdfg.all_sdfgs_recursive():
        for edge in nsdfg.all_interstate_edges():
            if sym in {str(f) for f in edge.data.free_symbols} or \
                    any((id(nsdfg), r, 0) in distributed for r in edge.data.read_symbols()):
                refuse(f'a condition or assignment between states ({edge.data.label}) reads {sym} or a distributed '
                       'array')
        for region in nsdfg.all_control_flow_regions():
            if isinstance(region, LoopRegion):
                code = ' '.join(c.as_string for c in (region.loop_condition, region.init_statement,
                                                       region.update_statement) if c is not None)
                if _mentions(code, sym) or any(_mentions(code, n) for (i, n, _) in distributed if i == id(nsdfg)):
                    refuse(f'the loop {region.label} depends on {sym} or a distributed array')
        for state in nsdfg.states():
            full_params = set()
            for node in state.nodes():
                if isinstance(node, nodes.MapEntry):
                    for param, (b, e, st) in zip(node.map.params, node.map.range):
                        syms = {str(f) for f in getattr(dace.symbolic.pystr_to_symbolic(str(e)), 'free_symbols', ())}
                        if sym in syms or sym in {str(f) for f in getattr(b, 'free_symbols', ())}:
                            if not (str(b) == '0' and str(e) == f'{sym} - 1' and str(st) == '1'):
                                refuse(f'the map {node.map.label} ranges over {b}:{e}')
                            full_params.add(param)
            for node in state.nodes():
                if isinstance(node, nodes.Tasklet) and sym in {str(f) for f in node.free_symbols}:
                    refuse(f'the tasklet {node.label} uses {sym} as a value')
                if isinstance(node, nodes.NestedSDFG) and nsdfg is sdfg:
                    inner = node.sdfg
                    for n, _ in inner.all_nodes_recursive():
                        if isinstance(n, (Reduce, Dot, MatMul)):
                            refuse(f'a reduction ({n.label}) inside the nested program {node.label}')
            for edge in state.edges():
                memlet = edge.data
                if memlet.data is None or memlet.subset is None:
                    continue
                for (i, name, axis) in distributed:
                    if i != id(nsdfg) or name != memlet.data or axis >= len(memlet.subset):
                        continue
                    b, e, st = memlet.subset[axis]
                    if str(b) == '0' and str(e) == f'{sym} - 1':
                        continue
                    if str(b) == str(e) and str(b) in full_params:
                        continue
                    if state.entry_node(edge.dst if isinstance(edge.dst, nodes.EntryNode) is False else edge.src) \
                            is None and str(b) == str(e) and str(b) in full_params:
                        continue
                    refuse(f'{name} is read or written at [{b}:{e}] (a fixed, shifted or partial range of the '
                           'distributed rows)')
                if memlet.wcr is not None and state.entry_node(edge.src if not isinstance(edge.src, nodes.AccessNode)
                                                               else edge.dst) is not None:
                    target = memlet.data
                    if not any(i == id(nsdfg) and n == target for (i, n, _) in distributed) and full_params:
                        refuse(f'a sum over the distributed rows written by hand into {target} (a map with '
                               'write-conflict resolution)')


@properties.make_properties
class DistributeSparseProducts(ppl.Pass):
    """Replaces the products of distributed sparse matrices and the reductions over the
    distributed dimension by callbacks (see the module docstring: the specification)."""

    CATEGORY: str = 'Sparse'

    matrices = properties.ListProperty(element_type=str, default=[],
                                       desc='Sparse arguments to distribute (empty: every sparse argument)')

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Everything

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def _plan(self, sdfg: dace.SDFG):
        """Everything the pass will change, checked first (raises before any change)."""
        names = [n for n, d in sdfg.arrays.items() if not d.transient and is_sparse_desc(d)]
        chosen = list(self.matrices) or names
        for name in chosen:
            if name not in names:
                raise UnsupportedOperationError(f'DistributeSparseProducts: {name!r} is not a sparse argument '
                                                f'(sparse arguments: {names})')
        symbols = set()
        for name in chosen:
            st = sparse_type_of(sdfg.arrays[name])
            if str(st.rows) != str(st.cols) or not isinstance(st.rows, dace.symbolic.symbol):
                raise UnsupportedOperationError(
                    f'DistributeSparseProducts: {name} is {st.rows} x {st.cols}; a distributed program needs a '
                    'square matrix whose rows and columns share one size symbol (ss.CSR[dtype, N, N])')
            symbols.add(str(st.rows))
        if len(symbols) > 1:
            raise UnsupportedOperationError(f'DistributeSparseProducts: the distributed matrices have different '
                                            f'size symbols {sorted(symbols)}; they must share one')

        for name, desc in sdfg.arrays.items():
            dims = [str(d) for d in getattr(desc, 'shape', ())]
            if symbols and dims.count(next(iter(symbols))) > 1:
                raise UnsupportedOperationError(f'DistributeSparseProducts: {name} is {" x ".join(dims)}: a dense '
                                                'array with the distributed size in two dimensions')
        products, reductions = [], []
        for state in sdfg.states():
            for node in state.nodes():
                if isinstance(node, (SpMV, SpMM)):
                    sources = {_structure_of(state, e)[0] for e in state.in_edges(node) if
                               e.dst_conn and e.dst_conn.startswith('_A_')}
                    hit = sources & set(chosen)
                    if not hit:
                        continue
                    if node.transpose_A:
                        raise UnsupportedOperationError(f'DistributeSparseProducts: {sorted(hit)[0]}.T @ ... is not '
                                                        'supported distributed (only A @ x and A @ X)')
                    if state.entry_node(node) is not None:
                        raise UnsupportedOperationError('DistributeSparseProducts: a distributed product inside a '
                                                        'map is not supported')
                    for e in list(state.in_edges(node)) + list(state.out_edges(node)):
                        if e.dst_conn in ('_x', '_B') or e.src_conn in ('_y', '_Y'):
                            _whole(sdfg, e.data, f'the product {node.label}')
                    products.append((state, node, sorted(hit)[0]))
                elif isinstance(node, (Reduce, Dot, MatMul)) and symbols:
                    sym = next(iter(symbols))
                    ins = [e for e in state.in_edges(node) if e.data.data is not None]
                    outs = state.out_edges(node)
                    spans = any(sym in [str(d) for d in sdfg.arrays[e.data.data].shape] for e in ins)
                    kept = any(sym in [str(d) for d in sdfg.arrays[e.data.data].shape] for e in outs)
                    if spans and not kept:  # summed (or max / min) over the distributed rows
                        op = _reduction_op(node)
                        if op is None:
                            raise UnsupportedOperationError(f'DistributeSparseProducts: reduction {node.label} over '
                                                            f'the distributed dimension with {node.wcr!r}')
                        if state.entry_node(node) is not None or len(outs) != 1:
                            raise UnsupportedOperationError('DistributeSparseProducts: a reduction over the '
                                                            'distributed dimension inside a map')
                        _whole(sdfg, outs[0].data, f'the reduction {node.label}')
                        reductions.append((state, node, op))
        # every other use of a distributed matrix (element-wise, sums, conversions ...)
        for state in sdfg.states():
            for node in state.nodes():
                if isinstance(node, nodes.LibraryNode) and not any(node is p[1] for p in products):
                    for e in state.in_edges(node):
                        src = _structure_of(state, e)[0] if isinstance(e.src, nodes.AccessNode) else None
                        if src in chosen:
                            raise UnsupportedOperationError(
                                f'DistributeSparseProducts: {src} is used by {type(node).__name__} '
                                f'({node.label}); a distributed matrix may only be multiplied (A @ x, A @ X)')
        for nsdfg in sdfg.all_sdfgs_recursive():
            if nsdfg is not sdfg:
                for name in chosen:
                    if any(n.data == name for n, _ in nsdfg.all_nodes_recursive() if isinstance(n, nodes.AccessNode)):
                        raise UnsupportedOperationError('DistributeSparseProducts: a distributed matrix used in a '
                                                        'nested program')
        if symbols:
            _check_local(sdfg, next(iter(symbols)), chosen)
        return chosen, (next(iter(symbols)) if symbols else None), products, reductions

    def apply_pass(self, sdfg: dace.SDFG, pipeline_results: Dict[str, Any]) -> Dict[str, Any]:
        chosen, symbol, products, reductions = self._plan(sdfg)
        done_products, done_reductions = {}, {}
        for number, (state, node, matrix) in enumerate(products):
            name = f'{PRODUCT_PREFIX}{number}'
            x_edge = next(e for e in state.in_edges(node) if e.dst_conn in ('_x', '_B'))
            y_edge = next(e for e in state.out_edges(node) if e.src_conn in ('_y', '_Y'))
            x_desc, y_desc = sdfg.arrays[x_edge.data.data], sdfg.arrays[y_edge.data.data]
            sdfg.add_symbol(name, dace.callback(None, x_desc, y_desc))
            tasklet = state.add_tasklet(name, {'__in_x'}, {'__out_y'}, f'{name}(__in_x, __out_y)', side_effects=True)
            state.add_edge(x_edge.src, x_edge.src_conn, tasklet, '__in_x', dace.Memlet.from_array(x_edge.data.data,
                                                                                                  x_desc))
            state.add_edge(tasklet, '__out_y', y_edge.dst, y_edge.dst_conn, dace.Memlet.from_array(y_edge.data.data,
                                                                                                   y_desc))
            sparse_edges = [e for e in state.in_edges(node) if e is not x_edge]
            state.remove_node(node)
            for e in sparse_edges:  # the structure's access chain, where nothing else reads it
                _, chain = _structure_of(state, e)
                for access in chain:
                    if access in state.nodes() and state.out_degree(access) == 0:
                        state.remove_node(access)
            kind = 'spmm' if isinstance(node, SpMM) else 'spmv'
            done_products[name] = (matrix, kind)
        for number, (state, node, op) in enumerate(reductions):
            name = f'{ALLREDUCE_PREFIX}{number}'
            out_edge = state.out_edges(node)[0]
            out_desc = sdfg.arrays[out_edge.data.data]
            partial, partial_desc = sdfg.add_temp_transient_like(out_desc)
            partial_access = state.add_access(partial)
            state.add_edge(node, out_edge.src_conn, partial_access, None,
                           dace.Memlet(data=partial, subset=out_edge.data.subset))
            if isinstance(out_desc, dace.data.Scalar):
                sdfg.add_symbol(name, dace.callback(out_desc.dtype, out_desc.dtype))
                tasklet = state.add_tasklet(name, {'__in'}, {'__out'}, f'__out = {name}(__in)', side_effects=True)
                state.add_edge(partial_access, None, tasklet, '__in', dace.Memlet(data=partial, subset='0'))
                state.add_edge(tasklet, '__out', out_edge.dst, out_edge.dst_conn,
                               dace.Memlet(data=out_edge.data.data, subset='0'))
            else:
                sdfg.add_symbol(name, dace.callback(None, partial_desc, out_desc))
                tasklet = state.add_tasklet(name, {'__in'}, {'__out'}, f'{name}(__in, __out)', side_effects=True)
                state.add_edge(partial_access, None, tasklet, '__in', dace.Memlet.from_array(partial, partial_desc))
                state.add_edge(tasklet, '__out', out_edge.dst, out_edge.dst_conn,
                               dace.Memlet.from_array(out_edge.data.data, out_desc))
            state.remove_edge(out_edge)
            done_reductions[name] = op
        for name in chosen:
            used = any(isinstance(n, nodes.AccessNode) and n.data == name for n, _ in sdfg.all_nodes_recursive())
            if not used:
                sdfg.remove_data(name, validate=False)
                if name in sdfg.arg_names:  # no longer an argument (the callbacks hold the matrix)
                    sdfg.arg_names.remove(name)
        for view in [n for n, d in sdfg.arrays.items() if isinstance(d, dace.data.View)]:
            if not any(isinstance(n, nodes.AccessNode) and n.data == view for n, _ in sdfg.all_nodes_recursive()):
                sdfg.remove_data(view, validate=False)
        return {'products': done_products, 'reductions': done_reductions, 'symbol': symbol}
