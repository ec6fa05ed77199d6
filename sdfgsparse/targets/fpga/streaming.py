"""Streaming dataflow designs of CSR products for the FPGA (the ``fpga`` implementation of
SpMV and SpMM, fused epilogue included: the GCN layer ``relu(A @ X + b)``).

One FPGA kernel state of six processing elements (PEs) connected by FIFOs, each a
pipelined loop (DaCe's Xilinx code generator makes every weakly connected component of
a kernel state a PE, run under ``#pragma HLS DATAFLOW``)::

    pos ─[read_rows]─ len_s ───────────────────────────────────┐
    vals, crd ─[read_entries]─ val_s, crd_s ─[gather]─ xv_s, vb_s ─[multiply]─ pr_s ─[accumulate]─ out_s ─[write]─ Y
                                        X ──┘ (row c of X)

- the dense dimension K is processed ``W`` columns at a time (``dace.vector`` streams and
  device arrays), ``P`` vectors per pass: a pass covers ``T = W * P`` columns, and the
  matrix is streamed once per pass (``Q = ceil(K / T)`` passes). The accumulator is a
  register array of ``L`` sets of ``P`` vectors: the ``t``-th product of a row updates
  ``acc[t % (P * L)]``, so one register is updated every ``P * L >= ADDER_LATENCY``
  cycles and the adder's latency does not hold the pipeline (:mod:`.model` takes the
  initiation interval from that recurrence); the ``L`` sets are summed when the row ends;
- ``multiply`` talks through vector streams only, so DaCe's TemporalVectorization can
  multi-pump it (``SparseMultiPumping``); ``gather`` reads row ``c`` of X (a random access
  per entry), ``vb_s`` carries the entry's value broadcast to a vector;
- X (and a per-column epilogue input) are copied to the device padded to ``Q * T``
  columns, in host transients (zeros beyond K), and Y comes back through one: the device
  arrays are ``vector[W]`` arrays whose rows are whole vectors;
- the number of stored entries is read on the host from the row pointers (``pos[M]``,
  a symbol of the kernels) before the kernel starts: an intermediate's arrays may be
  longer than its entries;
- SpMV is the case ``K = 1``, ``W = P = 1``;
- an epilogue (``SparseEpilogueFusion``) is applied in ``write``, lane by lane, with
  inputs indexed by the row (``{0}``) or the column (``{1}``).

:func:`streamable` says whether a node takes this design (or why not); :func:`stream_node`
replaces a node's state by the design, with states before it that copy (and pad) the
operands to the device and after it that copy the result back.
"""
import dataclasses
from typing import Dict, Optional

import dace
from dace import dtypes
from dace.memlet import Memlet

from sdfgsparse import errors
from sdfgsparse.lowering.epilogue import EPI_PREFIX, VALUE, substitute

__all__ = ['Design', 'streamable', 'stream_node', 'design_of', 'pump_multiply']

FPGA_Global, FPGA_Local, FPGA_Registers = (dtypes.StorageType.FPGA_Global, dtypes.StorageType.FPGA_Local,
                                           dtypes.StorageType.FPGA_Registers)
FPGA_Device = dtypes.ScheduleType.FPGA_Device
#: Cycles of a floating-point add that the accumulators hide (a float64 add on
#: UltraScale+ at 300 MHz takes 8; float32 7).
ADDER_LATENCY = 8
#: Attribute of a kernel state built here: its :class:`Design` and what it computes.
DESIGN_ATTR = '_ss_fpga_design'


@dataclasses.dataclass(frozen=True)
class Design:
    """The parameters of one streaming design.

    :param vector_width: ``W``, columns of the dense dimension per vector (a power of two).
    :param accumulators: ``P``, vectors accumulated per row in one pass (the row's
        partial sums interleave over them).
    :param depth: depth of every FIFO between the PEs.
    :param pumping: multi-pumping factor of the ``multiply`` PE (1: none; applied by
        ``SparseMultiPumping``).
    """
    vector_width: int = 4
    accumulators: int = 4
    depth: int = 8
    pumping: int = 1

    def __post_init__(self):
        for name in ('vector_width', 'accumulators', 'depth', 'pumping'):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f'Design.{name} must be a positive int, got {v!r}')
        if self.vector_width & (self.vector_width - 1):
            raise ValueError(f'Design.vector_width must be a power of two, got {self.vector_width}')
        if self.pumping not in (1, 2, 4) or self.vector_width % self.pumping:
            raise ValueError(f'Design.pumping must be 1, 2 or 4 and divide vector_width ({self.vector_width}), '
                             f'got {self.pumping}')

    @property
    def partial_sums(self) -> int:
        """``L``: sets of ``P`` accumulators that consecutive entries of a row take in
        turn, so an accumulator is updated every ``P * L >= ADDER_LATENCY`` products (the
        pipeline's initiation interval stays 1); summed when the row ends."""
        return -(-ADDER_LATENCY // self.accumulators)

    @property
    def tile(self) -> int:
        """``T``: columns per pass over the matrix."""
        return self.vector_width * self.accumulators

    def for_vector(self) -> 'Design':
        """The design of an SpMV (``K = 1``): one lane, one accumulator."""
        return dataclasses.replace(self, vector_width=1, accumulators=1, pumping=1)


def design_of(state: dace.SDFGState) -> Optional[dict]:
    """What :func:`stream_node` built in ``state`` (``design``, ``op``, ``epilogue``,
    ``dtype``, ``index``), or None for any other state."""
    return getattr(state, DESIGN_ATTR, None)


def streamable(node, state: dace.SDFGState) -> Optional[str]:
    """None when ``node`` (a sparse library node in ``state``) takes the streaming design,
    else why not (the node then takes its portable expansion)."""
    from sdfgsparse.ops.spmm import SpMM
    from sdfgsparse.ops.spmv import SpMV
    if not isinstance(node, (SpMM, SpMV)):
        return f'{type(node).__name__} has no streaming design'
    if node.transpose_A:
        return 'A is read transposed'
    st = node.operand_type(state, 'A')
    if st.fmt.name != 'CSR':
        return f'A is {st.fmt.name}, not CSR'
    vt = st.dtype
    if vt not in (dace.float32, dace.float64):
        return f'values of type {vt}'
    sdfg = state.parent
    dense_in, dense_out = ('_B', '_Y') if isinstance(node, SpMM) else ('_x', '_y')
    for conn, edges in ((dense_in, state.in_edges(node)), (dense_out, state.out_edges(node))):
        e = next((e for e in edges if (e.dst_conn if conn == dense_in else e.src_conn) == conn), None)
        if e is None:
            return f'{conn} is not connected'
        desc = sdfg.arrays[e.data.data]
        want = 2 if isinstance(node, SpMM) else 1
        if not isinstance(desc, dace.data.Array) or isinstance(desc, dace.data.View) or len(desc.shape) != want:
            return f'{conn} is not a {want}-D array'
        if desc.dtype != vt:
            return f'{conn} is {desc.dtype}, A is {vt}'
        if tuple(desc.strides) != tuple(dace.data._prod(desc.shape[i + 1:]) for i in range(len(desc.shape))) \
                or e.data.subset.num_elements() != desc.total_size:
            return f'{conn} is not the whole of a C-contiguous array'
    if node.epilogue:
        for conn, template in node.epilogue_inputs.items():
            if template.replace(' ', '') not in ('{0}', '{1}', ''):
                return f'epilogue input {conn} is indexed [{template}] (row or column only)'
    return None


def _connected(state, node, conn):
    for e in state.in_edges(node):
        if e.dst_conn == conn:
            return e
    for e in state.out_edges(node):
        if e.src_conn == conn:
            return e
    raise KeyError(conn)


def stream_node(sdfg: dace.SDFG, state: dace.SDFGState, node, design: Design) -> dace.SDFGState:
    """Replace ``state`` (which holds ``node``, a streamable CSR product, with its operands'
    access nodes and nothing else) by the streaming kernel; returns the kernel state. The
    member arrays of A must be plain arrays (after :func:`.lower.flatten_sparse_arguments`)."""
    from sdfgsparse.ops.spmm import SpMM
    spmm = isinstance(node, SpMM)
    if not spmm:
        design = design.for_vector()
    W, P, T = design.vector_width, design.accumulators, design.tile
    din, dout = ('_B', '_Y') if spmm else ('_x', '_y')
    pos, crd, vals = (_connected(state, node, f'_A_{m}').data.data for m in ('pos1', 'crd1', 'vals'))
    X, Y = _connected(state, node, din).data.data, _connected(state, node, dout).data.data
    epi_inputs = {c: (_connected(state, node, c).data.data, t.replace(' ', ''))
                  for c, t in (node.epilogue_inputs.items() if node.epilogue else ())}
    vt = sdfg.arrays[vals].dtype
    it = sdfg.arrays[crd].dtype
    rows, cols = sdfg.arrays[Y].shape[0], sdfg.arrays[X].shape[0]
    K = sdfg.arrays[X].shape[1] if spmm else 1
    vec = dace.vector(vt, W) if W > 1 else vt
    Q = dace.symbolic.pystr_to_symbolic(f'int_ceil({K}, {T})') if spmm else 1
    KP = Q * T  # padded columns

    # the kernel state replaces `state` (its edges kept); the copies go around it
    for n in list(state.nodes()):
        state.remove_node(n)
    kernel = state
    taken = {s.label for s in sdfg.states() if s is not kernel}
    kernel.label = next(f'{node.label}_stream{k or ""}' for k in range(len(taken) + 1)
                        if f'{node.label}_stream{k or ""}' not in taken)
    pre = sdfg.add_state_before(kernel, f'pre_{kernel.label}')
    # the stored entries, from the host's row pointers: an intermediate's arrays may be
    # longer than its entries (a capacity)
    nnz = sdfg.find_new_symbol(f'{kernel.label}_nnz')
    sdfg.add_symbol(nnz, it)
    count = sdfg.add_state_before(pre, f'count_{kernel.label}')
    sdfg.edges_between(count, pre)[0].data.assignments[nnz] = f'{pos}[{rows}]'
    post = sdfg.add_state_after(kernel, f'post_{kernel.label}')
    names: Dict[str, str] = {}

    def twin(host: str, shape, dtype, copy_from: Optional[str] = None) -> str:
        name = sdfg.add_array(f'fpga_{host}', shape, dtype, transient=True, storage=FPGA_Global,
                              find_new_name=True)[0]
        names[host] = name
        if copy_from is not None:
            pre.add_nedge(pre.add_read(copy_from), pre.add_write(name),
                          Memlet.from_array(copy_from, sdfg.arrays[copy_from]))
        return name

    def padded(host: str, shape_fn) -> str:
        """``host`` (K columns last) copied into a zero-padded host transient of KP columns."""
        desc = sdfg.arrays[host]
        if not spmm or (KP - K) == 0:
            return host
        pad = sdfg.add_array(f'{host}_pad', shape_fn(KP), desc.dtype, transient=True, find_new_name=True)[0]
        lead = [f'0:{s}' for s in desc.shape[:-1]]
        zero_state = pre  # zero the padding columns, then copy the K columns
        params = {f'__z{d}': r for d, r in enumerate(lead + [f'{K}:{KP}'])}
        zero_state.add_mapped_tasklet(f'pad_{host}', params, {}, '__o = 0',
                                      {'__o': Memlet(f'{pad}[{", ".join(params)}]')}, external_edges=True)
        pad_node = next(n for n in zero_state.data_nodes() if n.data == pad)
        zero_state.add_edge(zero_state.add_read(host), None, pad_node, None,
                            Memlet(data=host, subset=', '.join(lead + [f'0:{K}']),
                                   other_subset=', '.join(lead + [f'0:{K}'])))
        return pad

    fpos = twin(pos, sdfg.arrays[pos].shape, it, pos)
    fcrd = twin(crd, sdfg.arrays[crd].shape, it, crd)
    fvals = twin(vals, sdfg.arrays[vals].shape, vt, vals)
    if spmm:
        Xh = padded(X, lambda kp: [cols, kp])
        fX = twin(X, [cols, Q * P], vec)
        _chain(sdfg, pre, Xh, fX)
        Yh = Y if (KP - K) == 0 else sdfg.add_array(f'{Y}_pad', [rows, KP], vt, transient=True,
                                                   find_new_name=True)[0]
        fY = twin(Y, [rows, Q * P], vec)
    else:
        fX = twin(X, [cols], vt, X)
        Yh, fY = Y, twin(Y, [rows], vt)
    epi = {}
    for conn, (arr, template) in epi_inputs.items():
        if template == '{1}':
            h = padded(arr, lambda kp: [kp])
            epi[conn] = (twin(arr, [Q * P], vec), template)  # (one vector per write, like Y)
            _chain(sdfg, pre, h, epi[conn][0])
        else:
            epi[conn] = (twin(arr, sdfg.arrays[arr].shape, sdfg.arrays[arr].dtype, arr), template)
    post.add_nedge(post.add_read(fY), post.add_write(Yh), Memlet.from_array(Yh, sdfg.arrays[Yh]))
    if Yh != Y:
        last = next(n for n in post.data_nodes() if n.data == Yh)
        post.add_edge(last, None, post.add_write(Y), None,
                      Memlet(data=Yh, subset=f'0:{rows}, 0:{K}', other_subset=f'0:{rows}, 0:{K}'))

    # streams and registers of the kernel
    def stream(name, dtype):
        return sdfg.add_stream(name, dtype, buffer_size=design.depth, transient=True, storage=FPGA_Local,
                               find_new_name=True)[0]

    len_s, val_s, crd_s = stream('len_s', it), stream('val_s', vt), stream('crd_s', it)
    xv_s, vb_s, pr_s, out_s = stream('xv_s', vec), stream('vb_s', vec), stream('pr_s', vec), stream('out_s', vec)

    def register(name, dtype, shape=None):
        if shape is None:
            return sdfg.add_scalar(name, dtype, transient=True, storage=FPGA_Registers, find_new_name=True)[0]
        return sdfg.add_array(name, shape, dtype, transient=True, storage=FPGA_Registers, find_new_name=True)[0]

    rlen, v_reg, c_reg = register('rlen', it), register('v_reg', vt), register('c_reg', it)
    L = design.partial_sums
    acc = register('acc', vec, [P * L])
    st = kernel
    q_range = {'_sq': f'0:{Q}'}

    # read_rows: the length of every row, once per pass
    me, mx = st.add_map('read_rows', {**q_range, '_si': f'0:{rows}'}, schedule=FPGA_Device)
    t = st.add_tasklet('row_length', {'_b', '_e'}, {'_l'}, '_l = _e - _b')
    r = st.add_read(fpos)
    st.add_memlet_path(r, me, t, dst_conn='_b', memlet=Memlet(f'{fpos}[_si]'))
    st.add_memlet_path(r, me, t, dst_conn='_e', memlet=Memlet(f'{fpos}[_si + 1]'))
    st.add_memlet_path(t, mx, st.add_write(len_s), src_conn='_l', memlet=Memlet(f'{len_s}[0]'))

    # read_entries: (value, column) of every stored entry, once per pass
    me, mx = st.add_map('read_entries', {**q_range, '_sp': f'0:{nnz}'}, schedule=FPGA_Device)
    t = st.add_tasklet('entry', {'_v', '_c'}, {'_vo', '_co'}, '_vo = _v\n_co = _c')
    st.add_memlet_path(st.add_read(fvals), me, t, dst_conn='_v', memlet=Memlet(f'{fvals}[_sp]'))
    st.add_memlet_path(st.add_read(fcrd), me, t, dst_conn='_c', memlet=Memlet(f'{fcrd}[_sp]'))
    st.add_memlet_path(t, mx, st.add_write(val_s), src_conn='_vo', memlet=Memlet(f'{val_s}[0]'))
    st.add_memlet_path(t, mx, st.add_write(crd_s), src_conn='_co', memlet=Memlet(f'{crd_s}[0]'))

    # gather: per entry, P vectors of row c of X (this pass's columns) and P broadcasts of v
    gme, gmx = st.add_map('gather', {**q_range, '_sp': f'0:{nnz}'}, schedule=FPGA_Device)
    t_pop = st.add_tasklet('pop_entry', {'_v_in', '_c_in'}, {'_v', '_c'}, '_v = _v_in\n_c = _c_in')
    st.add_memlet_path(st.add_read(val_s), gme, t_pop, dst_conn='_v_in', memlet=Memlet(f'{val_s}[0]'))
    st.add_memlet_path(st.add_read(crd_s), gme, t_pop, dst_conn='_c_in', memlet=Memlet(f'{crd_s}[0]'))
    vr, cr = st.add_access(v_reg), st.add_access(c_reg)
    st.add_edge(t_pop, '_v', vr, None, Memlet(f'{v_reg}[0]'))
    st.add_edge(t_pop, '_c', cr, None, Memlet(f'{c_reg}[0]'))
    kme, kmx = st.add_map('gather_vectors', {'_skb': f'0:{P}'}, schedule=FPGA_Device, unroll=True)
    xidx = f'_c, _sq * {P} + _skb' if spmm else '_c'
    t_g = st.add_tasklet('gather_x', {'_v', '_c', '_x'}, {'_xo', '_vo'}, f'_xo = _x[{xidx}]\n_vo = _v')
    st.add_memlet_path(vr, kme, t_g, dst_conn='_v', memlet=Memlet(f'{v_reg}[0]'))
    st.add_memlet_path(cr, kme, t_g, dst_conn='_c', memlet=Memlet(f'{c_reg}[0]'))
    st.add_memlet_path(st.add_read(fX), gme, kme, t_g, dst_conn='_x',
                       memlet=Memlet.from_array(fX, sdfg.arrays[fX]))
    st.add_memlet_path(t_g, kmx, gmx, st.add_write(xv_s), src_conn='_xo', memlet=Memlet(f'{xv_s}[0]'))
    st.add_memlet_path(t_g, kmx, gmx, st.add_write(vb_s), src_conn='_vo', memlet=Memlet(f'{vb_s}[0]'))

    # multiply: one map over every product of every pass, vector streams only (pumpable)
    me, mx = st.add_map('multiply', {'_st': f'0:{Q * P} * {nnz}'}, schedule=FPGA_Device)
    t = st.add_tasklet('mul', {'_a', '_x'}, {'_o'}, '_o = _a * _x')
    st.add_memlet_path(st.add_read(vb_s), me, t, dst_conn='_a', memlet=Memlet(f'{vb_s}[0]'))
    st.add_memlet_path(st.add_read(xv_s), me, t, dst_conn='_x', memlet=Memlet(f'{xv_s}[0]'))
    st.add_memlet_path(t, mx, st.add_write(pr_s), src_conn='_o', memlet=Memlet(f'{pr_s}[0]'))

    # accumulate: per pass and row, the row's products into P vectors, then out
    rme, rmx = st.add_map('accumulate', {**q_range, '_si': f'0:{rows}'}, schedule=FPGA_Device)
    t_len = st.add_tasklet('pop_length', {'_l_in'}, {'_l_out'}, '_l_out = _l_in')
    st.add_memlet_path(st.add_read(len_s), rme, t_len, dst_conn='_l_in', memlet=Memlet(f'{len_s}[0]'))
    rl = st.add_access(rlen)
    st.add_edge(t_len, '_l_out', rl, None, Memlet(f'{rlen}[0]'))
    zme, zmx = st.add_map('zero_acc', {'_skb': f'0:{P * L}'}, schedule=FPGA_Device, unroll=True)
    t_zero = st.add_tasklet('zero', {}, {'_o'}, '_o = 0')
    st.add_nedge(rme, zme, Memlet())
    st.add_nedge(zme, t_zero, Memlet())
    acc0 = st.add_access(acc)
    st.add_memlet_path(t_zero, zmx, acc0, src_conn='_o', memlet=Memlet(f'{acc}[_skb]'))
    eme, emx = st.add_map('accumulate_row', {'_st': f'0:_srl * {P}'}, schedule=FPGA_Device)
    eme.add_in_connector('_srl')
    st.add_edge(rl, None, eme, '_srl', Memlet(f'{rlen}[0]'))
    t_acc = st.add_tasklet('add', {'_a', '_p'}, {'_o'}, '_o = _a + _p')
    st.add_memlet_path(st.add_read(pr_s), rme, eme, t_acc, dst_conn='_p', memlet=Memlet(f'{pr_s}[0]'))
    st.add_memlet_path(acc0, eme, t_acc, dst_conn='_a', memlet=Memlet(f'{acc}[_st % {P * L}]'))
    acc1 = st.add_access(acc)
    st.add_memlet_path(t_acc, emx, acc1, src_conn='_o', memlet=Memlet(f'{acc}[_st % {P * L}]'))
    fme, fmx = st.add_map('flush_row', {'_skb': f'0:{P}'}, schedule=FPGA_Device)
    total = ' + '.join(f'_a[_skb + {P * l}]' for l in range(L))  # the row's L partial sums
    t_push = st.add_tasklet('push', {'_a'}, {'_o'}, f'_o = {total}')
    st.add_memlet_path(acc1, fme, t_push, dst_conn='_a', memlet=Memlet(f'{acc}[0:{P * L}]'))
    st.add_memlet_path(t_push, fmx, rmx, st.add_write(out_s), src_conn='_o', memlet=Memlet(f'{out_s}[0]'))

    # write: the result vectors (the epilogue lane by lane)
    wparams = {**q_range, '_si': f'0:{rows}', '_skb': f'0:{P}'}
    yidx = f'_si, _sq * {P} + _skb' if spmm else '_si'
    me, mx = st.add_map('write', wparams, schedule=FPGA_Device)
    if not node.epilogue:
        t = st.add_tasklet('write_y', {'_r'}, {'_y'}, '_y = _r')
        st.add_memlet_path(st.add_read(out_s), me, t, dst_conn='_r', memlet=Memlet(f'{out_s}[0]'))
        st.add_memlet_path(t, mx, st.add_write(fY), src_conn='_y', memlet=Memlet(f'{fY}[{yidx}]'))
    else:
        _write_epilogue(st, node.epilogue, epi, me, mx, out_s, fY, yidx, vt, W, P, register)
    for n in st.nodes():  # PE functions are named after their tasklets: unique per kernel
        if isinstance(n, dace.nodes.Tasklet):  # (the C-simulation links every kernel into one library)
            n.label = f'{kernel.label}_{n.label}'
    setattr(kernel, DESIGN_ATTR, {'design': design, 'op': 'spmm' if spmm else 'spmv', 'epilogue': node.epilogue,
                                  'dtype': vt.to_string(), 'index': it.to_string()})
    return kernel


def _chain(sdfg, pre, host: str, dev: str) -> None:
    """host -> dev in ``pre``, from the host node already there if any (the memlet names the
    host array, so a copy into a vector array counts host elements)."""
    src = next((n for n in pre.data_nodes() if n.data == host and pre.in_degree(n)), None) or pre.add_read(host)
    pre.add_nedge(src, pre.add_write(dev), Memlet.from_array(host, sdfg.arrays[host]))


def _write_epilogue(st, expr, epi, me, mx, out_s, fY, yidx, vt, W, P, register) -> None:
    """write with the epilogue: the popped vector into registers, the expression per lane
    (unrolled), the lanes back into a vector for Y."""
    lanes_in, lanes_out = register('lanes_in', vt, [W]), register('lanes_out', vt, [W])
    vec = dace.vector(vt, W) if W > 1 else vt
    t_pop = st.add_tasklet('pop_result', {'_r'}, {'_o'}, '_o = _r')
    st.add_memlet_path(st.add_read(out_s), me, t_pop, dst_conn='_r', memlet=Memlet(f'{out_s}[0]'))
    t_pop.out_connectors['_o'] = vec
    li = st.add_access(lanes_in)
    st.add_edge(t_pop, '_o', li, None, Memlet(f'{lanes_in}[0:{W}]'))
    lme, lmx = st.add_map('epilogue_lanes', {'_sw': f'0:{W}'}, schedule=FPGA_Device, unroll=True)
    conns = {EPI_PREFIX + 'value'} | set(epi)
    code = substitute(expr, {VALUE: EPI_PREFIX + 'value'})
    t = st.add_tasklet('epilogue', conns, {'_o'}, f'_o = {code}')
    st.add_memlet_path(li, lme, t, dst_conn=EPI_PREFIX + 'value', memlet=Memlet(f'{lanes_in}[_sw]'))
    for conn, (arr, template) in epi.items():
        if template == '{1}':  # a column input: this write's vector of it, into registers
            lanes = register(f'lanes{conn}', vt, [W])
            t_in = st.add_tasklet(f'read{conn}', {'_r'}, {'_o'}, '_o = _r')
            t_in.out_connectors['_o'] = vec
            st.add_memlet_path(st.add_read(arr), me, t_in, dst_conn='_r', memlet=Memlet(f'{arr}[_sq * {P} + _skb]'))
            la = st.add_access(lanes)
            st.add_edge(t_in, '_o', la, None, Memlet(f'{lanes}[0:{W}]'))
            st.add_memlet_path(la, lme, t, dst_conn=conn, memlet=Memlet(f'{lanes}[_sw]'))
            continue
        idx = {'{0}': '_si', '': '0'}[template]
        st.add_memlet_path(st.add_read(arr), me, lme, t, dst_conn=conn, memlet=Memlet(f'{arr}[{idx}]'))
    lo = st.add_access(lanes_out)
    st.add_memlet_path(t, lmx, lo, src_conn='_o', memlet=Memlet(f'{lanes_out}[_sw]'))
    t_pack = st.add_tasklet('write_y', {'_r'}, {'_y'}, '_y = _r')
    t_pack.in_connectors['_r'] = vec
    st.add_edge(lo, None, t_pack, '_r', Memlet(f'{lanes_out}[0:{W}]'))
    st.add_memlet_path(t_pack, mx, st.add_write(fY), src_conn='_y', memlet=Memlet(f'{fY}[{yidx}]'))


def pump_multiply(sdfg: dace.SDFG, kernel: dace.SDFGState) -> None:
    """Multi-pump the ``multiply`` PE of the streaming ``kernel`` by its design's factor
    (nothing for a factor of 1): ``SparseMultiPumping``'s :func:`.pumping.pump`, which
    raises naming why when the PE cannot be pumped."""
    info = design_of(kernel)
    factor = info['design'].pumping
    if factor == 1 or info['design'].vector_width % factor:  # (an SpMV's single lane is not pumped)
        return
    from sdfgsparse.targets.fpga import pumping
    pes = [pe for pe in pumping.pumpable_elements(sdfg, factor) if pe.state is kernel and pe.name == 'multiply']
    if len(pes) != 1 or not pes[0].pumpable:
        raise errors.UnsupportedOperationError(
            f'{kernel.label}: the multiply element cannot be pumped by {factor}: '
            f'{"; ".join(pes[0].reasons) if pes else "not found"}')
    pumping.pump(sdfg, pes[0].subgraph, factor)
    from dace.libraries.standard import Gearbox
    for n in kernel.nodes():  # (their functions too are named after them: unique per kernel)
        if isinstance(n, Gearbox) and not n.name.startswith(kernel.label):
            n.name = f'{kernel.label}_{n.name}'
