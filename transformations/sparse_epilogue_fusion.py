"""``SparseEpilogueFusion``: fuse an element-wise map that consumes the dense result of a
sparse product (SpMV, SpMM) into the product's kernel."""
import ast

import dace
from dace import properties
from dace.sdfg import nodes
from dace.sdfg import utils as sdutil
from dace.transformation import transformation as xf

from sdfgsparse.lowering.epilogue import EPI_PREFIX, VALUE, compose, program_expressible
from sdfgsparse.ops.base import FusableSparseNode

__all__ = ['SparseEpilogueFusion']


@properties.make_properties
class SparseEpilogueFusion(xf.SingleStateTransformation):
    """Fuses an element-wise epilogue (bias, activation, scaling) into a sparse product.

    Matched pattern::

        SpMV/SpMM --> T (transient) --> map[i, k] { tasklet: out = f(T[i, k], b[k], ...) } --> O[i, k]

    becomes ``SpMV/SpMM --> O`` with ``f`` recorded on the node (``epilogue`` properties);
    the expansion applies ``f`` to each result element while its row is still being
    produced (SpMV: to the row's accumulator; SpMM over row-owning formats: right after the
    row), otherwise in one pass inside the same kernel. ``T`` disappears.

    Example: ``np.maximum(A @ (X @ W) + b, 0)`` (a GCN layer with bias) has two such maps;
    applying the transformation twice leaves one SpMM node whose kernel writes
    ``np.maximum(Y[i, k] + b[k], 0)`` (a second fusion composes with the first; NaN stays
    NaN, as in NumPy).

    Applicability:

    - ``T`` is a transient written only by the product and read only by the map (in this
      state, and nowhere else in the SDFG);
    - the map spans ``T``'s full shape and contains a single Python tasklet with a single
      assignment, reading ``T`` exactly at the map indices and writing one output exactly
      at the map indices, with the same shape and dtype as ``T`` (or one slice of it at
      indices fixed in the map: ``Y[i]`` of a batch loop, ``Y[i, __i0, __i1]``);
    - every other tasklet input is a whole-array read indexed by map parameters only
      (``b[k]``) and becomes a node input; constants in the code are kept;
    - the code has no conditional expression other than the NaN-propagating extrema of
      ``np.maximum`` / ``np.minimum`` (``a if (a > b or a != a) else b``), which the cpu
      kernels write as those calls (a kernel statement cannot hold ``a if c else b``).
    """
    CATEGORY = 'Sparse'

    product = xf.PatternNode(FusableSparseNode)
    tmp = xf.PatternNode(nodes.AccessNode)
    map_entry = xf.PatternNode(nodes.MapEntry)

    @classmethod
    def expressions(cls):
        return [sdutil.node_path_graph(cls.product, cls.tmp, cls.map_entry)]

    # ------------------------------------------------------------------ predicates
    def _tasklet(self, state):
        """The single tasklet of the map scope, or None."""
        inner = state.scope_subgraph(self.map_entry, include_entry=False, include_exit=False).nodes()
        if len(inner) != 1 or not isinstance(inner[0], nodes.Tasklet):
            return None
        return inner[0]

    def can_be_applied(self, state, expr_index, sdfg, permissive=False):
        tmp, entry = self.tmp, self.map_entry
        desc = sdfg.arrays[tmp.data]
        if not desc.transient or isinstance(desc, dace.data.View):
            return False  # the intermediate must be ours to remove
        if state.in_degree(tmp) != 1 or state.out_degree(tmp) != 1:
            return False  # another writer or reader of the intermediate
        if any(n.data == tmp.data for s in sdfg.states() for n in s.data_nodes() if n is not tmp):
            return False  # used elsewhere
        tasklet = self._tasklet(state)
        if tasklet is None or tasklet.language != dace.dtypes.Language.Python:
            return False  # not a single element-wise tasklet
        params = list(entry.map.params)
        if [str(r) for r in entry.map.range.size()] != [str(s) for s in desc.shape]:
            return False  # the map does not span the intermediate
        if len(entry.map.range) != len(desc.shape) or any(str(r[0]) != '0' or r[2] != 1 for r in entry.map.range):
            return False  # not a plain full-range map
        body = ast.parse(tasklet.code.as_string).body
        if len(body) != 1 or not isinstance(body[0], ast.Assign):
            return False  # a single assignment only
        if not program_expressible(ast.unparse(body[0].value)):
            return False  # a conditional other than np.maximum / np.minimum: the cpu kernels cannot write it
        value_conn = None
        for e in state.in_edges(tasklet):
            if e.data.data is None:
                return False
            idx = [str(r[0]) for r in e.data.subset]
            if e.data.data == tmp.data:
                if idx != params or value_conn is not None:
                    return False  # the intermediate must be read exactly at the map indices
                value_conn = e.dst_conn
            elif _index_template(e.data.subset, params) is None:
                return False  # another input indexed by something else than map parameters
        if value_conn is None:
            return False
        outs = state.out_edges(tasklet)
        if len(outs) != 1 or _leading_indices(outs[0].data.subset, params) is None:
            return False  # a single output written at the map indices (after indices fixed in the map)
        out_desc = sdfg.arrays[outs[0].data.data]
        lead = len(out_desc.shape) - len(params)
        if out_desc.dtype != desc.dtype or [str(s) for s in out_desc.shape[lead:]] != [str(s) for s in desc.shape]:
            return False  # the product writes the output (or one slice Y[i] of it) directly: same dtype and shape
        exit_ = state.exit_node(entry)
        if state.out_degree(exit_) != 1:
            return False
        return True

    # ------------------------------------------------------------------ model
    def decision(self, state, sdfg, sizes=None, machine=None):
        """The data-movement model's verdict on this match
        (:func:`sdfgsparse.analysis.schedules.epilogue_decision`): the product writing the
        map's output against the product plus a pass over its result, given symbol values
        ``sizes``. None when a size is unknown (the fused schedule moves less at every
        size: it drops a write and a read of the result)."""
        from sdfgsparse._symbolic import evaluate
        from sdfgsparse.analysis.schedules import Machine, epilogue_decision, product_cost, spmm_bound_bytes
        from sdfgsparse.transformations._sizes import size_values, stored_slots
        product = self.product
        if not hasattr(product, 'operand_type'):
            return None
        st = product.operand_type(state, 'A')
        desc = sdfg.arrays[self.tmp.data]
        values = size_values(sdfg, sizes)
        k = evaluate(desc.shape[1], values) if len(desc.shape) == 2 else 1
        rows, cols = evaluate(st.rows, values), evaluate(st.cols, values)
        nnz = stored_slots(st, values)
        if None in (k, rows, cols, nnz):
            return None
        m = machine or Machine.here()
        extra = sum(1 for e in state.in_edges(self.map_entry) if e.data.data != self.tmp.data)
        v = desc.dtype.bytes
        return epilogue_decision(product.label, product_cost(rows, cols, nnz, k, m, v, st.index_dtype.bytes), rows, k,
                                 m, v, extra, spmm_bound_bytes(rows, cols, nnz, k, m, v))

    # ------------------------------------------------------------------ rewrite
    def apply(self, state, sdfg):
        product, tmp, entry = self.product, self.tmp, self.map_entry
        tasklet = self._tasklet(state)
        exit_ = state.exit_node(entry)
        params = list(entry.map.params)
        out_edge = state.out_edges(exit_)[0]
        out_node = out_edge.dst
        inputs = dict(product.epilogue_inputs)
        renames = {}
        value_conn = None
        for e in state.in_edges(tasklet):
            if e.data.data == tmp.data:
                value_conn = e.dst_conn
                continue
            conn = f'{EPI_PREFIX}{len(inputs)}'
            renames[e.dst_conn] = conn
            inputs[conn] = _index_template(e.data.subset, params)
            outer = next(oe for oe in state.in_edges(entry) if oe.dst_conn == 'IN_' + e.src_conn[len('OUT_'):])
            product.add_in_connector(conn)
            state.add_edge(outer.src, outer.src_conn, product, conn,
                           dace.Memlet.from_array(outer.data.data, sdfg.arrays[outer.data.data]))
        product.epilogue = compose(tasklet.code.as_string.strip(), value_conn, renames, product.epilogue or VALUE)
        product.epilogue_inputs = inputs
        # the product now writes the map's output
        prod_edge = state.in_edges(tmp)[0]
        out_desc = sdfg.arrays[out_node.data]
        lead = _leading_indices(state.out_edges(tasklet)[0].data.subset, params)
        written = dace.subsets.Range([(x, x, 1) for x in lead] + [(0, s - 1, 1) for s in out_desc.shape[len(lead):]])
        state.add_edge(product, prod_edge.src_conn, out_node, None, dace.Memlet(data=out_node.data, subset=written))
        for n in state.scope_subgraph(entry).nodes():
            state.remove_node(n)
        state.remove_node(tmp)
        for n in list(state.data_nodes()):
            if state.degree(n) == 0:
                state.remove_node(n)
        if tmp.data in sdfg.arrays and not any(n.data == tmp.data for s in sdfg.states() for n in s.data_nodes()):
            sdfg.remove_data(tmp.data)


def _leading_indices(subset, params):
    """The indices before the map parameters of an output written at ``Y[i, __i0, __i1]``
    (``[i]``; ``[]`` for ``Y[__i0, __i1]``), or None unless the subset ends in exactly the
    map parameters and every index before them is one point that does not vary in the map."""
    ranges = list(subset)
    lead = len(ranges) - len(params)
    if lead < 0 or [str(r[0]) for r in ranges[lead:]] != list(params) or any(r[0] != r[1] for r in ranges):
        return None
    fixed = [r[0] for r in ranges[:lead]]
    if any(str(sym) in params for x in fixed for sym in getattr(x, 'free_symbols', ())):
        return None
    return fixed


def _index_template(subset, params):
    """``b[__i1]`` under map params (__i0, __i1) -> ``'{1}'``; None unless every index is a
    single map parameter (or the whole array is one element)."""
    parts = []
    for r in subset:
        if r[0] != r[1]:
            return None
        name = str(r[0])
        if name in params:
            parts.append('{%d}' % params.index(name))
        elif name == '0' and subset.num_elements() == 1:
            parts.append('0')
        else:
            return None
    return ', '.join(parts)
