"""Streaming dataflow designs of CSR operations for the FPGA: SpMV and SpMM, fused
epilogue included (the GCN layer ``relu(A @ X + b)``), and SDDMM (see
:func:`_stream_sddmm`, built from the same elements).

An SpMM is one FPGA kernel state of six processing elements (PEs) connected by FIFOs, each a
pipelined loop (DaCe's Xilinx code generator makes every weakly connected component of
a kernel state a PE, run under ``#pragma HLS DATAFLOW``)::

    pos ─[read_rows]─ len_s ─────────────────────────────────────┐
    vals, crd ─[read_entries]─ val_s, crd_s ─[gather]─ xv_s, vb_s ─[multiply]─ pr_s ─[accumulate]─ out_s
                                        X ──┘ (row c of X)                   Y ─[write]─────────────┘

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

:func:`streamable` says whether a node takes a design (or why not); :func:`stream_node`
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
from sdfgsparse.ops.base import member_conn

__all__ = ['Design', 'streamable', 'stream_node', 'design_of', 'pump_multiply']

FPGA_Global, FPGA_Local, FPGA_Registers = (dtypes.StorageType.FPGA_Global, dtypes.StorageType.FPGA_Local,
                                           dtypes.StorageType.FPGA_Registers)
FPGA_Device = dtypes.ScheduleType.FPGA_Device
#: Cycles of a floating-point add that the accumulators hide (a float64 add on
#: UltraScale+ at 300 MHz takes 8; float32 7).
ADDER_LATENCY = 8
#: Attribute of a kernel state built here: its :class:`Design` and what it computes.
DESIGN_ATTR = '_ss_fpga_design'
#: Names the designs give their loop variables (and the tasklet connectors next to which
#: a size symbol appears in code): a program whose symbols or data use one of them takes
#: the portable expansion instead (a size named ``_sq`` would be read as the pass index).
RESERVED = frozenset({'_sq', '_si', '_sp', '_sj', '_skb', '_st', '_sw', '_srl', '__tn', '__tk', '_d', '_v', '_prev'})


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


def _whole_array(sdfg, e, dims: int, vt, member: bool = False) -> Optional[str]:
    """Why the data of edge ``e`` is not a whole C-contiguous ``dims``-D array of ``vt``
    (a sparse member's view, ``member``, is one: the lowering flattens it into an array)."""
    desc = sdfg.arrays[e.data.data]
    if not isinstance(desc, dace.data.Array) or (isinstance(desc, dace.data.View) and not member) \
            or len(desc.shape) != dims:
        return f'is not a {dims}-D array'
    if desc.dtype != vt:
        return f'is {desc.dtype}, the matrix {vt}'
    if tuple(desc.strides) != tuple(dace.data._prod(desc.shape[i + 1:]) for i in range(len(desc.shape))) \
            or e.data.subset.num_elements() != desc.total_size:
        return 'is not the whole of a C-contiguous array'
    return None


def streamable(node, state: dace.SDFGState) -> Optional[str]:
    """None when ``node`` (a sparse library node in ``state``) takes a streaming design,
    else why not (the node then takes its portable expansion)."""
    from sdfgsparse.ops.sddmm import SDDMM
    from sdfgsparse.ops.spmm import SpMM
    from sdfgsparse.ops.spmv import SpMV
    if not isinstance(node, (SpMM, SpMV, SDDMM)):
        return f'{type(node).__name__} has no streaming design'
    sdfg = state.parent
    taken = sorted(RESERVED & ({str(s) for s in sdfg.free_symbols} | set(sdfg.symbols) | set(sdfg.arrays)))
    if taken:
        return f'the program uses the name(s) {", ".join(taken)}, which the streaming designs reserve'
    prefix = 'S' if isinstance(node, SDDMM) else 'A'
    if isinstance(node, SDDMM) and node.y_layout != 'KN':
        return f'Y is laid out {node.y_layout}'
    if getattr(node, f'transpose_{prefix}'):
        return f'{prefix} is read transposed'
    st = node.operand_type(state, prefix)
    if st.fmt.name != 'CSR':
        return f'{prefix} is {st.fmt.name}, not CSR'
    vt = st.dtype
    if vt not in (dace.float32, dace.float64):
        return f'values of type {vt}'
    dense = {SpMM: {'_B': 2, '_Y': 2}, SpMV: {'_x': 1, '_y': 1}, SDDMM: {'_X': 2, '_Y': 2}}[type(node)]
    if isinstance(node, SDDMM):
        dense[member_conn('out', 'vals')] = 1
    for conn, dims in dense.items():
        e = node.edge(state, conn)
        if e is None:
            return f'{conn} is not connected'
        why = _whole_array(state.parent, e, dims, vt, member=conn.startswith('_out_'))
        if why:
            return f'{conn} {why}'
    if getattr(node, 'epilogue', ''):
        for conn, template in node.epilogue_inputs.items():
            if template.replace(' ', '') not in ('{0}', '{1}', ''):
                return f'epilogue input {conn} is indexed [{template}] (row or column only)'
    return None


class _Kernel:
    """A streaming kernel built in place of a node's state: the kernel state (the node's
    state, emptied, its interstate edges kept), a state before it that reads the number
    of stored entries from the host's row pointers, one that copies (and pads) operands
    to their FPGA twins, one after it that copies results back."""

    def __init__(self, sdfg: dace.SDFG, state: dace.SDFGState, node, design: Design, pos: str, rows, it):
        self.sdfg, self.design = sdfg, design
        for n in list(state.nodes()):
            state.remove_node(n)
        self.st = state
        taken = {s.label for s in sdfg.states() if s is not state}
        state.label = next(f'{node.label}_stream{k or ""}' for k in range(len(taken) + 1)
                           if f'{node.label}_stream{k or ""}' not in taken)
        self.pre = sdfg.add_state_before(state, f'pre_{state.label}')
        # the stored entries: an intermediate's arrays may be longer (a capacity)
        self.nnz = sdfg.find_new_symbol(f'{state.label}_nnz')
        sdfg.add_symbol(self.nnz, it)
        count = sdfg.add_state_before(self.pre, f'count_{state.label}')
        sdfg.edges_between(count, self.pre)[0].data.assignments[self.nnz] = f'{pos}[{rows}]'
        self.post = sdfg.add_state_after(state, f'post_{state.label}')

    def twin(self, host: str, shape, dtype, copy: bool = False) -> str:
        """The FPGA-global twin of ``host`` (copied in before the kernel when ``copy``)."""
        name = self.sdfg.add_array(f'fpga_{host}', shape, dtype, transient=True, storage=FPGA_Global,
                                   find_new_name=True)[0]
        if copy:
            self.copy_in(host, name)
        return name

    def copy_in(self, host: str, dev: str) -> None:
        """host -> dev before the kernel, from the host node already written there if any
        (the memlet names the host array, so a copy into a vector array counts host
        elements)."""
        pre = self.pre
        src = next((n for n in pre.data_nodes() if n.data == host and pre.in_degree(n)), None) or pre.add_read(host)
        pre.add_nedge(src, pre.add_write(dev), Memlet.from_array(host, self.sdfg.arrays[host]))

    def copy_out(self, dev: str, host: str, final: Optional[str] = None, K=None) -> None:
        """dev -> host after the kernel; then the first ``K`` columns of host into
        ``final`` (a padded result)."""
        post = self.post
        node = post.add_write(host)
        post.add_nedge(post.add_read(dev), node, Memlet.from_array(host, self.sdfg.arrays[host]))
        if final is not None and final != host:
            lead = [f'0:{s}' for s in self.sdfg.arrays[final].shape[:-1]] + [f'0:{K}']
            post.add_edge(node, None, post.add_write(final), None,
                          Memlet(data=host, subset=', '.join(lead), other_subset=', '.join(lead)))

    def host_copy(self, src: str, dst: str) -> None:
        """src -> dst on the host after the kernel (a result's index arrays)."""
        self.post.add_nedge(self.post.add_read(src), self.post.add_write(dst),
                            Memlet.from_array(src, self.sdfg.arrays[src]))

    def padded(self, host: str, K, KP) -> str:
        """``host`` (K columns last) in a host transient of KP columns, zeros beyond K
        (``host`` itself when KP is K)."""
        sdfg, pre = self.sdfg, self.pre
        if (KP - K) == 0:
            return host
        desc = sdfg.arrays[host]
        pad = sdfg.add_array(f'{host}_pad', list(desc.shape[:-1]) + [KP], desc.dtype, transient=True,
                             find_new_name=True)[0]
        lead = [f'0:{s}' for s in desc.shape[:-1]]
        params = {f'__z{d}': r for d, r in enumerate(lead + [f'{K}:{KP}'])}
        pre.add_mapped_tasklet(f'pad_{host}', params, {}, '__o = 0', {'__o': Memlet(f'{pad}[{", ".join(params)}]')},
                               external_edges=True)
        pad_node = next(n for n in pre.data_nodes() if n.data == pad)
        pre.add_edge(pre.add_read(host), None, pad_node, None,
                     Memlet(data=host, subset=', '.join(lead + [f'0:{K}']), other_subset=', '.join(lead + [f'0:{K}'])))
        return pad

    def transposed_padded(self, host: str, K, KP) -> str:
        """``host`` (K x N) transposed into a host transient N x KP, zeros beyond K: its
        columns become rows that a gather reads as vectors."""
        sdfg, pre = self.sdfg, self.pre
        k, n = sdfg.arrays[host].shape
        t = sdfg.add_array(f'{host}_T', [n, KP], sdfg.arrays[host].dtype, transient=True, find_new_name=True)[0]
        pre.add_mapped_tasklet(f'transpose_{host}', {'__tn': f'0:{n}', '__tk': f'0:{KP}'},
                               {'__i': Memlet(f'{host}[0:{k}, __tn]')}, f'__o = __i[__tk] if __tk < {K} else 0',
                               {'__o': Memlet(f'{t}[__tn, __tk]')}, external_edges=True)
        return t

    def stream(self, name: str, dtype) -> str:
        return self.sdfg.add_stream(name, dtype, buffer_size=self.design.depth, transient=True, storage=FPGA_Local,
                                    find_new_name=True)[0]

    def register(self, name: str, dtype, shape=None) -> str:
        if shape is None:
            return self.sdfg.add_scalar(name, dtype, transient=True, storage=FPGA_Registers, find_new_name=True)[0]
        return self.sdfg.add_array(name, shape, dtype, transient=True, storage=FPGA_Registers, find_new_name=True)[0]

    def finish(self, info: dict) -> dace.SDFGState:
        for n in self.st.nodes():  # PE functions are named after their tasklets: unique per kernel
            if isinstance(n, dace.nodes.Tasklet):  # (the C-simulation links every kernel into one library)
                n.label = f'{self.st.label}_{n.label}'
        setattr(self.st, DESIGN_ATTR, {'design': self.design, **info})
        return self.st


def stream_node(sdfg: dace.SDFG, state: dace.SDFGState, node, design: Design) -> dace.SDFGState:
    """Replace ``state`` (which holds ``node``, a streamable CSR operation, with its
    operands' access nodes and nothing else) by the streaming kernel; returns the kernel
    state. The member arrays of the sparse operand must be plain arrays (after
    :func:`.lower.flatten_sparse_arguments`)."""
    from sdfgsparse.ops.sddmm import SDDMM
    if isinstance(node, SDDMM):
        return _stream_sddmm(sdfg, state, node, design)
    return _stream_product(sdfg, state, node, design)


def _row_length(st: dace.SDFGState, me, fpos: str):
    """A tasklet in the row map ``me`` (parameter ``_si``) whose output ``_l`` is the length
    of row ``_si`` from the row pointers ``fpos``."""
    t = st.add_tasklet('row_length', {'_b', '_e'}, {'_l'}, '_l = _e - _b')
    r = st.add_read(fpos)
    st.add_memlet_path(r, me, t, dst_conn='_b', memlet=Memlet(f'{fpos}[_si]'))
    st.add_memlet_path(r, me, t, dst_conn='_e', memlet=Memlet(f'{fpos}[_si + 1]'))
    return t


def _to_lanes(st: dace.SDFGState, label: str, lanes: str, vec, W: int):
    """A tasklet (input connector ``_r``, for the caller to connect) that stores a vector
    into the register array ``lanes`` of its ``W`` lanes; returns (tasklet, the lanes'
    access node)."""
    t = st.add_tasklet(label, {'_r'}, {'_o'}, '_o = _r')
    t.out_connectors['_o'] = vec
    la = st.add_access(lanes)
    st.add_edge(t, '_o', la, None, Memlet(f'{lanes}[0:{W}]'))
    return t, la


def _read_rows(k: _Kernel, fpos: str, rows, q_range: dict, len_s: str) -> None:
    """read_rows: the length of every row, once per pass."""
    st = k.st
    me, mx = st.add_map('read_rows', {**q_range, '_si': f'0:{rows}'}, schedule=FPGA_Device)
    t = _row_length(st, me, fpos)
    st.add_memlet_path(t, mx, st.add_write(len_s), src_conn='_l', memlet=Memlet(f'{len_s}[0]'))


def _read_entries(k: _Kernel, q_range: dict, arrays: Dict[str, str]) -> None:
    """read_entries: every stored entry's members (array -> stream), once per pass."""
    st = k.st
    me, mx = st.add_map('read_entries', {**q_range, '_sp': f'0:{k.nnz}'}, schedule=FPGA_Device)
    conns = {a: f'_m{i}' for i, a in enumerate(arrays)}
    t = st.add_tasklet('entry', set(conns.values()), {c + 'o' for c in conns.values()},
                       '\n'.join(f'{c}o = {c}' for c in conns.values()))
    for a, s in arrays.items():
        st.add_memlet_path(st.add_read(a), me, t, dst_conn=conns[a], memlet=Memlet(f'{a}[_sp]'))
        st.add_memlet_path(t, mx, st.add_write(s), src_conn=conns[a] + 'o', memlet=Memlet(f'{s}[0]'))


def _gather(k: _Kernel, q_range: dict, P: int, label: str, pops: Dict[str, tuple], arrays: Dict[str, str],
            code: str, pushes: Dict[str, str]) -> None:
    """gather: per entry, one value of each stream of ``pops`` (connector -> (stream,
    register)) into registers, then ``P`` times (unrolled) ``code`` over them and the
    ``arrays`` it reads at random (connector -> FPGA array), pushing its outputs
    (connector -> stream)."""
    st = k.st
    gme, gmx = st.add_map('gather', {**q_range, '_sp': f'0:{k.nnz}'}, schedule=FPGA_Device)
    t_pop = st.add_tasklet('pop_entry', {c + '_in' for c in pops}, set(pops), '\n'.join(f'{c} = {c}_in' for c in pops))
    regs = {}
    for c, (s, r) in pops.items():
        st.add_memlet_path(st.add_read(s), gme, t_pop, dst_conn=c + '_in', memlet=Memlet(f'{s}[0]'))
        regs[c] = st.add_access(r)
        st.add_edge(t_pop, c, regs[c], None, Memlet(f'{r}[0]'))
    kme, kmx = st.add_map('gather_vectors', {'_skb': f'0:{P}'}, schedule=FPGA_Device, unroll=True)
    t_g = st.add_tasklet(label, set(pops) | set(arrays), set(pushes), code)
    for c, (_, r) in pops.items():
        st.add_memlet_path(regs[c], kme, t_g, dst_conn=c, memlet=Memlet(f'{r}[0]'))
    for c, a in arrays.items():
        st.add_memlet_path(st.add_read(a), gme, kme, t_g, dst_conn=c, memlet=Memlet.from_array(a, k.sdfg.arrays[a]))
    for c, s in pushes.items():
        st.add_memlet_path(t_g, kmx, gmx, st.add_write(s), src_conn=c, memlet=Memlet(f'{s}[0]'))


def _multiply(k: _Kernel, count, a_s: str, b_s: str, pr_s: str) -> None:
    """multiply: one map over every product of every pass, vector streams only (the PE
    that ``SparseMultiPumping`` pumps)."""
    st = k.st
    me, mx = st.add_map('multiply', {'_st': f'0:{count}'}, schedule=FPGA_Device)
    t = st.add_tasklet('mul', {'_a', '_x'}, {'_o'}, '_o = _a * _x')
    st.add_memlet_path(st.add_read(a_s), me, t, dst_conn='_a', memlet=Memlet(f'{a_s}[0]'))
    st.add_memlet_path(st.add_read(b_s), me, t, dst_conn='_x', memlet=Memlet(f'{b_s}[0]'))
    st.add_memlet_path(t, mx, st.add_write(pr_s), src_conn='_o', memlet=Memlet(f'{pr_s}[0]'))


def _stream_product(sdfg, state, node, design: Design) -> dace.SDFGState:
    """SpMV / SpMM (see the module)."""
    from sdfgsparse.ops.spmm import SpMM
    spmm = isinstance(node, SpMM)
    if not spmm:
        design = design.for_vector()
    W, P, T = design.vector_width, design.accumulators, design.tile
    din, dout = ('_B', '_Y') if spmm else ('_x', '_y')
    pos, crd, vals = (node.edge(state, f'_A_{m}').data.data for m in ('pos1', 'crd1', 'vals'))
    X, Y = node.edge(state, din).data.data, node.edge(state, dout).data.data
    epi_inputs = {c: (node.edge(state, c).data.data, t.replace(' ', ''))
                  for c, t in (node.epilogue_inputs.items() if node.epilogue else ())}
    vt = sdfg.arrays[vals].dtype
    it = sdfg.arrays[crd].dtype
    rows, cols = sdfg.arrays[Y].shape[0], sdfg.arrays[X].shape[0]
    K = sdfg.arrays[X].shape[1] if spmm else 1
    vec = dace.vector(vt, W) if W > 1 else vt
    Q = dace.symbolic.pystr_to_symbolic(f'int_ceil({K}, {T})') if spmm else 1
    KP = Q * T  # padded columns
    k = _Kernel(sdfg, state, node, design, pos, rows, it)
    fpos, fcrd, fvals = (k.twin(a, sdfg.arrays[a].shape, sdfg.arrays[a].dtype, True) for a in (pos, crd, vals))
    if spmm:
        fX = k.twin(X, [cols, Q * P], vec)
        k.copy_in(k.padded(X, K, KP), fX)
        Yh = Y if (KP - K) == 0 else sdfg.add_array(f'{Y}_pad', [rows, KP], vt, transient=True, find_new_name=True)[0]
        fY = k.twin(Y, [rows, Q * P], vec)
    else:
        fX = k.twin(X, [cols], vt, True)
        Yh, fY = Y, k.twin(Y, [rows], vt)
    epi = {}
    for conn, (arr, template) in epi_inputs.items():
        if template == '{1}':
            epi[conn] = (k.twin(arr, [Q * P], vec), template)  # (one vector per write, like Y)
            k.copy_in(k.padded(arr, K, KP) if spmm else arr, epi[conn][0])
        else:
            epi[conn] = (k.twin(arr, sdfg.arrays[arr].shape, sdfg.arrays[arr].dtype, True), template)
    k.copy_out(fY, Yh, Y, K)

    len_s, val_s, crd_s = k.stream('len_s', it), k.stream('val_s', vt), k.stream('crd_s', it)
    xv_s, vb_s, pr_s, out_s = (k.stream('xv_s', vec), k.stream('vb_s', vec), k.stream('pr_s', vec),
                               k.stream('out_s', vec))
    rlen, v_reg, c_reg = k.register('rlen', it), k.register('v_reg', vt), k.register('c_reg', it)
    L = design.partial_sums
    acc = k.register('acc', vec, [P * L])
    st = k.st
    q_range = {'_sq': f'0:{Q}'}
    _read_rows(k, fpos, rows, q_range, len_s)
    _read_entries(k, q_range, {fvals: val_s, fcrd: crd_s})

    # gather: per entry, P vectors of row c of X (this pass's columns) and P broadcasts of v
    xidx = f'_c, _sq * {P} + _skb' if spmm else '_c'
    _gather(k, q_range, P, 'gather_x', {'_v': (val_s, v_reg), '_c': (crd_s, c_reg)}, {'_x': fX},
            f'_xo = _x[{xidx}]\n_vo = _v', {'_xo': xv_s, '_vo': vb_s})

    _multiply(k, f'{Q * P} * {k.nnz}', vb_s, xv_s, pr_s)

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
        _write_epilogue(st, node.epilogue, epi, me, mx, out_s, fY, yidx, vt, W, P, k.register)
    return k.finish({'op': 'spmm' if spmm else 'spmv', 'epilogue': node.epilogue, 'dtype': vt.to_string(),
                     'index': it.to_string()})


def _stream_sddmm(sdfg, state, node, design: Design) -> dace.SDFGState:
    """SDDMM ``out = S * (X @ Y)`` on S's pattern, seven PEs::

        pos ─[row_index]─ row_s ─┐
        crd ─[read_entries]─ crd_s ─[gather]─ xv_s, yv_s ─[multiply]─ pr_s ─[reduce]─ dot_s ─┐
                         X, Y.T ──┘ (row i of X, row c of Y.T)                S vals ─[write]─ out vals

    ``row_index`` expands the row pointers into each entry's row; per pass of ``T = W * P``
    columns, ``gather`` sends P vectors of row ``i`` of X and of row ``c`` of Y's transpose
    (laid out on the host, padded), ``multiply`` their products (the pumpable PE),
    ``reduce`` sums an entry's P vectors and W lanes, and ``write`` adds the pass's partial
    dot product to the entry's value slot, scaling by S's value after the last pass. The
    result's row pointers and indices are S's, copied on the host."""
    W, P, T = design.vector_width, design.accumulators, design.tile
    pos, crd, vals = (node.edge(state, f'_S_{m}').data.data for m in ('pos1', 'crd1', 'vals'))
    opos, ocrd, ovals = (node.edge(state, member_conn('out', m)).data.data for m in ('pos1', 'crd1', 'vals'))
    X, Y = node.edge(state, '_X').data.data, node.edge(state, '_Y').data.data
    vt, it = sdfg.arrays[vals].dtype, sdfg.arrays[crd].dtype
    rows, K = sdfg.arrays[X].shape
    vec = dace.vector(vt, W) if W > 1 else vt
    # (at least one pass: with K = 0 the padded zeros give every entry the value 0)
    Q = dace.symbolic.pystr_to_symbolic(f'Max(1, int_ceil({K}, {T}))')
    KP = Q * T
    k = _Kernel(sdfg, state, node, design, pos, rows, it)
    fpos, fcrd, fvals = (k.twin(a, sdfg.arrays[a].shape, sdfg.arrays[a].dtype, True) for a in (pos, crd, vals))
    fX = k.twin(X, [rows, Q * P], vec)
    k.copy_in(k.padded(X, K, KP), fX)
    cols = sdfg.arrays[Y].shape[1]
    fYt = k.twin(Y, [cols, Q * P], vec)
    k.copy_in(k.transposed_padded(Y, K, KP), fYt)
    fout = k.twin(ovals, sdfg.arrays[ovals].shape, vt, True)  # (write reads it back after the first pass)
    k.copy_out(fout, ovals)
    k.host_copy(pos, opos)
    k.host_copy(crd, ocrd)

    row_s, crd_s, xv_s, yv_s, pr_s, dot_s = (k.stream('row_s', it), k.stream('crd_s', it), k.stream('xv_s', vec),
                                            k.stream('yv_s', vec), k.stream('pr_s', vec), k.stream('dot_s', vt))
    rlen, i_reg, c_reg = k.register('rlen', it), k.register('i_reg', it), k.register('c_reg', it)
    dacc = k.register('dacc', vec, [1])
    st = k.st
    q_range = {'_sq': f'0:{Q}'}

    # row_index: each entry's row, once per pass
    rme, rmx = st.add_map('row_index', {**q_range, '_si': f'0:{rows}'}, schedule=FPGA_Device)
    t = _row_length(st, rme, fpos)
    rl = st.add_access(rlen)
    st.add_edge(t, '_l', rl, None, Memlet(f'{rlen}[0]'))
    eme, emx = st.add_map('row_entries', {'_sj': '0:_srl'}, schedule=FPGA_Device)
    eme.add_in_connector('_srl')
    st.add_edge(rl, None, eme, '_srl', Memlet(f'{rlen}[0]'))
    t = st.add_tasklet('row_of_entry', {}, {'_o'}, '_o = _si')
    st.add_nedge(eme, t, Memlet())
    st.add_memlet_path(t, emx, rmx, st.add_write(row_s), src_conn='_o', memlet=Memlet(f'{row_s}[0]'))

    _read_entries(k, q_range, {fcrd: crd_s})

    # gather: per entry, P vectors of row i of X and of row c of Y.T (this pass's columns)
    _gather(k, q_range, P, 'gather_xy', {'_i': (row_s, i_reg), '_c': (crd_s, c_reg)}, {'_x': fX, '_y': fYt},
            f'_xo = _x[_i, _sq * {P} + _skb]\n_yo = _y[_c, _sq * {P} + _skb]', {'_xo': xv_s, '_yo': yv_s})

    _multiply(k, f'{Q * P} * {k.nnz}', xv_s, yv_s, pr_s)

    # reduce: an entry's P product vectors, then its W lanes, into one partial dot product
    dme, dmx = st.add_map('reduce', {**q_range, '_sp': f'0:{k.nnz}'}, schedule=FPGA_Device)
    t_zero = st.add_tasklet('zero', {}, {'_o'}, '_o = 0')
    st.add_nedge(dme, t_zero, Memlet())
    d0 = st.add_access(dacc)
    st.add_edge(t_zero, '_o', d0, None, Memlet(f'{dacc}[0]'))
    ume, umx = st.add_map('reduce_vectors', {'_skb': f'0:{P}'}, schedule=FPGA_Device, unroll=True)
    t_add = st.add_tasklet('add', {'_a', '_p'}, {'_o'}, '_o = _a + _p')
    st.add_memlet_path(st.add_read(pr_s), dme, ume, t_add, dst_conn='_p', memlet=Memlet(f'{pr_s}[0]'))
    st.add_memlet_path(d0, ume, t_add, dst_conn='_a', memlet=Memlet(f'{dacc}[0]'))
    d1 = st.add_access(dacc)
    st.add_memlet_path(t_add, umx, d1, src_conn='_o', memlet=Memlet(f'{dacc}[0]'))
    if W > 1:
        lanes = k.register('lanes', vt, [W])
        t_l, la = _to_lanes(st, 'to_lanes', lanes, vec, W)
        st.add_edge(d1, None, t_l, '_r', Memlet(f'{dacc}[0]'))
        t_s = st.add_tasklet('sum_lanes', {'_l'}, {'_d'}, '_d = ' + ' + '.join(f'_l[{w}]' for w in range(W)))
        st.add_edge(la, None, t_s, '_l', Memlet(f'{lanes}[0:{W}]'))
    else:
        t_s = st.add_tasklet('sum_lanes', {'_l'}, {'_d'}, '_d = _l')
        st.add_edge(d1, None, t_s, '_l', Memlet(f'{dacc}[0]'))
    st.add_memlet_path(t_s, dmx, st.add_write(dot_s), src_conn='_d', memlet=Memlet(f'{dot_s}[0]'))

    # write: the pass's partial dot product added to the value slot, scaled by S's value at the end
    wme, wmx = st.add_map('write', {**q_range, '_sp': f'0:{k.nnz}'}, schedule=FPGA_Device)
    t_w = st.add_tasklet('write_value', {'_d', '_v', '_prev'}, {'_o'},
                         f'_o = ((_prev if _sq > 0 else 0) + _d) * (_v if _sq * {T} + {T} >= {K} else 1)')
    st.add_memlet_path(st.add_read(dot_s), wme, t_w, dst_conn='_d', memlet=Memlet(f'{dot_s}[0]'))
    st.add_memlet_path(st.add_read(fvals), wme, t_w, dst_conn='_v', memlet=Memlet(f'{fvals}[_sp]'))
    st.add_memlet_path(st.add_read(fout), wme, t_w, dst_conn='_prev', memlet=Memlet(f'{fout}[_sp]'))
    st.add_memlet_path(t_w, wmx, st.add_write(fout), src_conn='_o', memlet=Memlet(f'{fout}[_sp]'))
    return k.finish({'op': 'sddmm', 'epilogue': '', 'dtype': vt.to_string(), 'index': it.to_string()})


def _write_epilogue(st, expr, epi, me, mx, out_s, fY, yidx, vt, W, P, register) -> None:
    """write with the epilogue: the popped vector into registers, the expression per lane
    (unrolled), the lanes back into a vector for Y."""
    lanes_in, lanes_out = register('lanes_in', vt, [W]), register('lanes_out', vt, [W])
    vec = dace.vector(vt, W) if W > 1 else vt
    t_pop, li = _to_lanes(st, 'pop_result', lanes_in, vec, W)
    st.add_memlet_path(st.add_read(out_s), me, t_pop, dst_conn='_r', memlet=Memlet(f'{out_s}[0]'))
    lme, lmx = st.add_map('epilogue_lanes', {'_sw': f'0:{W}'}, schedule=FPGA_Device, unroll=True)
    conns = {EPI_PREFIX + 'value'} | set(epi)
    code = substitute(expr, {VALUE: EPI_PREFIX + 'value'})
    t = st.add_tasklet('epilogue', conns, {'_o'}, f'_o = {code}')
    st.add_memlet_path(li, lme, t, dst_conn=EPI_PREFIX + 'value', memlet=Memlet(f'{lanes_in}[_sw]'))
    for conn, (arr, template) in epi.items():
        if template == '{1}':  # a column input: this write's vector of it, into registers
            t_in, la = _to_lanes(st, f'read{conn}', register(f'lanes{conn}', vt, [W]), vec, W)
            st.add_memlet_path(st.add_read(arr), me, t_in, dst_conn='_r', memlet=Memlet(f'{arr}[_sq * {P} + _skb]'))
            st.add_memlet_path(la, lme, t, dst_conn=conn, memlet=Memlet(f'{la.data}[_sw]'))
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
    if factor == 1:  # (an SpMV's design has one lane and no pumping: Design.for_vector)
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
