"""A resource and performance model of an FPGA design, read from its lowered SDFG.

:func:`model_design` walks the FPGA kernel states of an SDFG (what
:func:`~sdfgsparse.targets.fpga.lower.to_fpga` or a hand-built streaming design produces)
and estimates, per processing element (PE), the DSPs, LUTs, flip-flops, BRAM and URAM it
needs and the cycles it takes, as sympy expressions in the SDFG's symbols (``M``, ``NNZ``
...), then the memory traffic of each global array against the board's bandwidth.
:meth:`DesignModel.evaluate` puts numbers in, :meth:`DesignModel.table` prints a report.

It is an estimate from the SDFG, not synthesis: routing, timing closure, HLS's own
scheduling and operator sharing, the platform shell's resources, host<->device copies and
the real memory controller are not modelled. Its use is to compare two versions of a
design (multi-pumped or not, wider vectors, another dtype) and to find the bottleneck.

Processing elements
    A kernel state (``dace.sdfg.utils.is_fpga_kernel``) is split with
    ``dace.sdfg.concurrent_subgraphs``, as DaCe's Xilinx code generator does: each weakly
    connected component is a PE (a ``module_*`` function under ``#pragma HLS DATAFLOW``).
    Gearbox library nodes (inserted by ``TemporalVectorization``) are PEs of their own.

Loops, trips and initiation interval
    A map is a loop; an ``unroll=True`` map is spatial (its body is replicated). A
    non-unrolled map that contains no other non-unrolled map is pipelined (DaCe's
    ``_is_innermost``, which puts ``PIPELINE II=1`` on it). Its trips are the map's range;
    a pipelined map alone in an outer map's body is flattened with it (``LOOP_FLATTEN``),
    otherwise it is restarted once per outer iteration and pays its pipeline depth each time.

    A *dynamic* range (a map whose range reads an in-connector, e.g. ``0:rl`` with ``rl`` a
    popped row length) is summed over the whole call by one of two rules:

    1. stream conservation: the loop pops a FIFO once per iteration (or ``f`` times, through
       unrolled maps), so over one call it runs (items pushed into that FIFO) / ``f`` times;
       the producer's pushes come from its own trips (computed first; the model iterates
       until the counts settle);
    2. pointer telescoping: a range ``P[i]:P[i+1]`` under a loop over ``i`` sums to
       ``P[last] - P[0]``, which for a compressed level is the length of the array the loop
       indexes with its own variable (``crd[p]``, ``vals[p]``: ``nnz``).

    Otherwise it becomes a new symbol ``<map>_trips`` (see :attr:`DesignModel.notes`).

    The initiation interval is 1, raised by (the largest wins, each reason is reported):

    - a loop-carried recurrence: a tasklet that reads and writes the same element of a
      register/local array (``acc[kb] = acc[kb] + ...``) or writes with a WCR. The latency
      of the operations between that input and the output (e.g. a float add) must pass
      before the next update of the same element; when the index cycles through ``P``
      elements (``acc[t % P]``) the updates interleave: ``II = ceil(latency / P)``;
      global memory adds ``MAXI_LATENCY`` to the latency;
    - memory ports: each global array is its own ``m_axi`` bundle (as DaCe emits it), with
      one read and one write per cycle, so ``k`` reads of one array per iteration give
      ``II >= k``; a *random* read (an index read from data, ``x[c, kb]``) cannot burst and
      is limited by ``MAXI_OUTSTANDING`` requests in flight over ``MAXI_LATENCY`` cycles;
    - a FIFO accessed ``k`` times per iteration: ``II >= k``.

Cycles
    A pipelined loop takes ``trips * II + entries * depth`` cycles, where the depth is one
    cycle plus the latencies of the tasklets of its body in sequence (an upper bound when
    they are independent) plus ``MAXI_LATENCY`` for a body that reads global memory. A
    non-pipelined loop takes its body's cycles plus one per iteration; a statement outside a
    pipeline takes its latency (plus ``MAXI_LATENCY`` if it reads global memory). A PE's cycles are
    the sum of its loops; a multi-pumped PE runs at ``F`` times the clock, so its cycles
    at the base clock are divided by ``F``. A kernel state takes the longest PE plus the
    sum of the PEs' pipeline depths (filling the dataflow chain; an upper bound), and
    consecutive kernel states add up. States inside loops of the SDFG count once.

Multi-pumping
    ``TemporalVectorization`` (DaCe 1.0.2, approach 2) makes a PE's map
    ``FPGA_Multi_Pumped`` and puts Gearboxes between its ``W``-wide streams and new
    ``W/F``-wide ones. DaCe does not store ``F`` (its ``apply`` doubles the range and its
    RTL wrapper has two clocks, whatever the factor): the model reads it from the Gearbox
    widths (``gear factor = W / (W/F)``). The pumped PE's operations are counted on its
    ``W/F``-lane connectors, so its DSPs are those of ``W/F`` lanes, and its ``F``-times
    longer range runs at ``F`` times the clock: the same throughput as ``W`` lanes.
    Gearboxes cost a ``W``-wide register buffer and its multiplexer, no DSP. Whether the
    fast clock closes is not modelled: a note flags a pumped clock above about 650 MHz.

Resources
    Operations are counted from the Python tasklets' code (``ast``): ``+ -`` add, ``*``
    mul, ``/`` div, comparisons, ``min``/``max`` (compare and select), ``exp``/``log``,
    ``sqrt``; ``abs`` and negation are sign-bit operations (free); integer multiplies,
    divisions and modulos by a literal are shifts or LUT logic; index arithmetic inside
    subscripts is address generation (not counted). The dtype of an operation is the wider
    of its operands' (connector dtype, else the memlet's data dtype), a literal takes the
    other operand's. Each operation costs, per lane (``dace.vector`` width) and per copy
    (enclosing unrolled maps), the entry of :data:`OP_COSTS`; operators are not shared.
    Storage: a FIFO of depth <= ``SRL_MAX_DEPTH`` is a shift register in LUTs, a deeper one
    BRAM18s (``max(ceil(depth * bits / 18 Kib), ceil(bits / 36))``); an ``FPGA_Registers``
    array is flip-flops (plus a read multiplexer), an ``FPGA_Local`` array BRAM18s the same
    way (LUT RAM under 1 Kib); DaCe 1.0.2 emits no URAM binding, so URAM stays 0. Each
    ``m_axi`` port costs an adapter with a burst FIFO per direction (``MAXI_OUTSTANDING *
    MAXI_BURST`` words).

Memory traffic
    Bytes read and written per call, per global array: every tasklet access counts (two
    reads of one element count twice: HLS does not cache them), with the element size
    of the array's dtype (vectors included); an access to a whole array subscripted in the
    code (``x[c, kb]``) counts one element per subscript. The bandwidth needed is that over
    the modelled time; each array sits in its bank (``desc.location['memorytype'/'bank']``,
    else bank 0 of the board's default memory, as Vitis links an unassigned port).
"""
import ast
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple

import dace
import sympy
from dace import data as dt
from dace import dtypes
from dace.sdfg import nodes

from sdfgsparse import errors

__all__ = ['model_design', 'DesignModel', 'PEModel', 'LoopModel', 'FifoModel', 'PortModel', 'Board', 'BOARDS',
           'OpCost', 'OP_COSTS', 'MAXI_LATENCY', 'MAXI_OUTSTANDING', 'MAXI_BURST', 'SRL_MAX_DEPTH']


@dataclass(frozen=True)
class OpCost:
    """Cost of one lane of an operator: DSP slices, LUTs, flip-flops, latency in cycles."""
    dsp: int
    lut: int
    ff: int
    latency: int


#: (kind, type class) -> cost per lane. Xilinx UltraScale+ with Vitis HLS's default bindings
#: at 300 MHz: DSPs and latencies of the floating-point cores as Vitis HLS reports them
#: (``fadd_32ns_32ns_32_7_full_dsp``: 2 DSP, 7 stages; ``fmul_..._4_max_dsp``: 3 DSP, 4 stages;
#: ``dadd_..._8_full_dsp``: 3 DSP; ``dmul_..._7_max_dsp``: 11 DSP; ``fdiv_..._16_no_dsp``,
#: ``ddiv_..._59_no_dsp``, ``fcmp_..._2_no_dsp``: 0 DSP), the same numbers as the
#: Floating-Point Operator's resource tables (PG060) for those options. ``exp``/``sqrt`` DSPs,
#: all LUT/FF figures and the integer rows (a 32x32 multiply on three 27x18 DSP48E2s, a
#: 64-bit one on ten; adds and compares in LUT carry chains) are rounded assumptions.
OP_COSTS: Dict[Tuple[str, str], OpCost] = {
    ('add', 'f32'): OpCost(2, 230, 350, 7),
    ('mul', 'f32'): OpCost(3, 80, 150, 4),
    ('div', 'f32'): OpCost(0, 800, 1400, 16),
    ('cmp', 'f32'): OpCost(0, 70, 70, 2),
    ('exp', 'f32'): OpCost(7, 900, 900, 8),
    ('sqrt', 'f32'): OpCost(0, 500, 800, 16),
    ('add', 'f64'): OpCost(3, 700, 900, 8),
    ('mul', 'f64'): OpCost(11, 200, 350, 7),
    ('div', 'f64'): OpCost(0, 3200, 4000, 59),
    ('cmp', 'f64'): OpCost(0, 160, 130, 2),
    ('exp', 'f64'): OpCost(26, 2200, 2500, 18),
    ('sqrt', 'f64'): OpCost(0, 1600, 3000, 57),
    ('add', 'i32'): OpCost(0, 32, 32, 1),
    ('mul', 'i32'): OpCost(3, 20, 60, 2),
    ('div', 'i32'): OpCost(0, 1200, 1300, 36),
    ('cmp', 'i32'): OpCost(0, 16, 0, 1),
    ('add', 'i64'): OpCost(0, 64, 64, 1),
    ('mul', 'i64'): OpCost(10, 100, 200, 4),
    ('div', 'i64'): OpCost(0, 4200, 4400, 68),
    ('cmp', 'i64'): OpCost(0, 32, 0, 1),
}
_BITS = {'f32': 32, 'f64': 64, 'i32': 32, 'i64': 64}
_RANK = {'i32': 0, 'i64': 1, 'f32': 2, 'f64': 3}

#: Latency (cycles) Vitis HLS assumes for an ``m_axi`` access (its ``latency`` default, UG1399).
MAXI_LATENCY = 64
#: Read requests an ``m_axi`` adapter keeps in flight (``num_read_outstanding`` default).
MAXI_OUTSTANDING = 16
#: Beats per burst (``max_read_burst_length`` default).
MAXI_BURST = 16
#: Deepest FIFO implemented as a shift register (SRL32) rather than BRAM.
SRL_MAX_DEPTH = 32
_BRAM18_BITS, _BRAM18_WIDTH, _LUTRAM_BITS = 18 * 1024, 36, 1024
_LOOP_LUT, _LOOP_FF, _PE_LUT, _PE_FF = 60, 60, 100, 100  # counter + FSM per loop; handshake per PE
_LOCAL_LATENCY = 2  # BRAM read + write in a recurrence
_DEFAULT_PUMP = 2  # DaCe 1.0.2's TemporalVectorization hard-codes two clocks
_FABRIC_MHZ = 650  # above this an UltraScale+ design rarely closes timing (an assumption; not checked)


@dataclass(frozen=True)
class Board:
    """A board: device totals and memory banks (type -> (banks, GB/s per bank))."""
    name: str
    dsp: int
    lut: int
    ff: int
    bram18: int
    uram: int
    banks: Dict[str, Tuple[int, float]]
    default_memory: str
    source: str

    @property
    def bandwidth(self) -> float:
        """Peak GB/s of all banks together."""
        return sum(n * bw for n, bw in self.banks.values())


#: Alveo boards. Device totals (whole device; the platform shell takes a part) and memories from
#: the data sheets: DS962 (U200/U250), DS963 (U280), DS978 (U55C). DDR4-2400 x 64 bit is 19.2 GB/s
#: a bank; HBM2 is 460 GB/s over 32 pseudo-channels (14.375 GB/s each).
BOARDS: Dict[str, Board] = {
    'u250': Board('Alveo U250', dsp=12288, lut=1728000, ff=3456000, bram18=5376, uram=1280, banks={'DDR': (4, 19.2)},
                  default_memory='DDR', source='DS962: XCU250, 4x DDR4-2400 (77 GB/s)'),
    'u280': Board('Alveo U280', dsp=9024, lut=1304000, ff=2607000, bram18=4032, uram=960,
                  banks={'HBM': (32, 14.375), 'DDR': (2, 19.2)}, default_memory='HBM',
                  source='DS963: XCU280, HBM2 8 GB (460 GB/s) + 2x DDR4-2400 (38 GB/s)'),
    'u55c': Board('Alveo U55C', dsp=9024, lut=1304000, ff=2607000, bram18=4032, uram=960, banks={'HBM': (32, 14.375)},
                  default_memory='HBM', source='DS978: XCU55C, HBM2 16 GB (460 GB/s)'),
}


@dataclass
class LoopModel:
    """One loop of a PE: trips and entries over one call, II, pipeline depth, cycles (PE clock)."""
    label: str
    pipelined: bool
    trips: sympy.Expr
    entries: sympy.Expr
    ii: int
    depth: int
    cycles: sympy.Expr
    ii_reasons: Dict[str, int] = field(default_factory=dict)
    trips_rule: str = 'range'


@dataclass
class PEModel:
    """One processing element. ``trips`` sums its pipelined loops' trips and ``cycles`` is at the
    base clock (a pumped PE runs ``pumping`` times faster); ``ops`` counts operator lanes by
    ``kind.dtype`` (per iteration of the loop that holds them, hence also the hardware instances)."""
    name: str
    state: str
    schedule: str
    pumping: int
    clock_mhz: float
    loops: List[LoopModel]
    trips: sympy.Expr
    ii: int
    ops: Dict[str, int]
    dsp: int
    lut: int
    ff: int
    bram18: int
    uram: int
    cycles: sympy.Expr
    depth: int


@dataclass
class FifoModel:
    """A stream between PEs: depth, width, implementation (SRL or BRAM) and cost."""
    name: str
    depth: int
    bits: int
    impl: str
    lut: int
    ff: int
    bram18: int


@dataclass
class PortModel:
    """An ``m_axi`` port (one global array): bytes per call, bank and adapter cost."""
    array: str
    read_bytes: sympy.Expr
    write_bytes: sympy.Expr
    bits: int
    bank: Tuple[str, str]
    lut: int
    ff: int
    bram18: int


def _bram18(depth: int, bits: int) -> int:
    return max(math.ceil(depth * bits / _BRAM18_BITS), math.ceil(bits / _BRAM18_WIDTH))


def _int(expr, default: int = 1) -> int:
    try:
        return int(sympy.sympify(expr))
    except (TypeError, ValueError):
        return default


def _num(expr, values: Dict[str, float]) -> float:
    expr = sympy.sympify(expr)
    expr = expr.subs({s: values[s.name] for s in expr.free_symbols if s.name in values})
    return float(expr)


@dataclass
class DesignModel:
    """The model of one design (see the module). Expressions are in the SDFG's symbols
    (:attr:`symbols`); :attr:`aliases` maps ``nnz``/``rows``/``cols``/``k`` to those found."""
    name: str
    board: Board
    clock_mhz: float
    pes: List[PEModel]
    fifos: List[FifoModel]
    ports: List[PortModel]
    state_cycles: List[sympy.Expr]
    aliases: Dict[str, str]
    notes: List[str]
    sdfg_symbols: List[str] = field(default_factory=list)  # accepted by evaluate though no figure needs them

    @property
    def dsp(self) -> int:
        return sum(p.dsp for p in self.pes)

    @property
    def lut(self) -> int:
        return sum(p.lut for p in self.pes) + sum(f.lut for f in self.fifos) + sum(p.lut for p in self.ports)

    @property
    def ff(self) -> int:
        return sum(p.ff for p in self.pes) + sum(f.ff for f in self.fifos) + sum(p.ff for p in self.ports)

    @property
    def bram18(self) -> int:
        return sum(p.bram18 for p in self.pes) + sum(f.bram18 for f in self.fifos) + sum(p.bram18 for p in self.ports)

    @property
    def uram(self) -> int:
        return sum(p.uram for p in self.pes)

    @property
    def cycles(self) -> sympy.Expr:
        """Cycles of one call at the base clock (symbolic)."""
        return sympy.Add(*self.state_cycles)

    @property
    def bytes(self) -> Dict[str, sympy.Expr]:
        """Bytes read plus written per call, per global array."""
        out: Dict[str, sympy.Expr] = defaultdict(lambda: sympy.Integer(0))
        for p in self.ports:
            out[p.array] += p.read_bytes + p.write_bytes
        return dict(out)

    @property
    def symbols(self) -> List[str]:
        exprs = list(self.state_cycles) + [p.read_bytes + p.write_bytes for p in self.ports]
        return sorted({s.name for e in exprs for s in sympy.sympify(e).free_symbols})

    def pe(self, name: str) -> PEModel:
        """The PE called ``name`` (or the only one whose name contains it)."""
        found = [p for p in self.pes if p.name == name] or [p for p in self.pes if name in p.name]
        if len(found) != 1:
            raise errors.ArgumentError(f'pe: {name!r} names {len(found)} PEs of {self.name}; its PEs are '
                                       f'{[p.name for p in self.pes]}')
        return found[0]

    def _values(self, symbols: Dict[str, float]) -> Dict[str, float]:
        names = self.symbols
        accepted = sorted(set(names) | set(self.sdfg_symbols))
        values = {}
        for key, value in symbols.items():
            target = key if key in accepted else self.aliases.get(key.lower())
            if target is None:
                target = next((n for n in accepted if n.lower() == key.lower()), None)
            if target is None:
                raise errors.ArgumentError(f'evaluate: {key}={value!r} is not a symbol of {self.name}; its symbols are '
                                           f'{accepted} (aliases {sorted(self.aliases)})')
            values[target] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise errors.ArgumentError(f'evaluate: {self.name} needs values for {missing} (pass them as keywords, '
                                       f'e.g. {missing[0]}=1000)')
        return values

    def evaluate(self, **symbols) -> dict:
        """Numbers for the given symbol values (names of :attr:`symbols` or the aliases
        ``nnz=``, ``rows=``, ``cols=``, ``k=``): cycles, seconds at the clock, the bottleneck PE,
        cycles per PE, bytes per array, GB/s needed against the board's (total and per bank,
        and whether a bank is the limit), and the utilisation of DSP/LUT/FF/BRAM/URAM."""
        v = self._values(symbols)
        pe_cycles = {p.name: _num(p.cycles, v) for p in self.pes}
        cycles = sum(_num(c, v) for c in self.state_cycles)
        seconds = cycles / (self.clock_mhz * 1e6)
        nbytes = {a: _num(b, v) for a, b in self.bytes.items()}
        total = sum(nbytes.values())
        banks: Dict[Tuple[str, str], dict] = {}
        for p in self.ports:
            kind, bank = p.bank
            lo, _, hi = bank.partition(':')
            nb = int(hi) - int(lo) if hi.isdigit() and lo.isdigit() else 1  # a bank range 'a:b' (DaCe multibank)
            peak = nb * self.board.banks.get(kind, (0, 0.0))[1]
            entry = banks.setdefault(p.bank, {'bytes': 0.0, 'gbps_peak': peak, 'arrays': []})
            entry['bytes'] += _num(p.read_bytes + p.write_bytes, v)
            entry['arrays'].append(p.array)
        seconds_memory = 0.0
        for entry in banks.values():
            entry['gbps_needed'] = entry['bytes'] / seconds / 1e9 if seconds else 0.0
            if entry['gbps_peak']:
                seconds_memory = max(seconds_memory, entry['bytes'] / (entry['gbps_peak'] * 1e9))
        b = self.board
        return {
            'cycles': cycles, 'seconds': seconds, 'clock_mhz': self.clock_mhz,
            'bottleneck': max(pe_cycles, key=pe_cycles.get) if pe_cycles else None, 'pe_cycles': pe_cycles,
            'bytes': nbytes, 'bytes_total': total, 'gbps_needed': total / seconds / 1e9 if seconds else 0.0,
            'gbps_board': b.bandwidth, 'banks': banks, 'seconds_memory': seconds_memory,
            'memory_bound': seconds_memory > seconds, 'seconds_bound': max(seconds, seconds_memory),
            'dsp': self.dsp, 'lut': self.lut, 'ff': self.ff, 'bram18': self.bram18, 'uram': self.uram,
            'utilisation': {'dsp': self.dsp / b.dsp, 'lut': self.lut / b.lut, 'ff': self.ff / b.ff,
                            'bram18': self.bram18 / b.bram18, 'uram': self.uram / b.uram},
        }

    def table(self, **symbols) -> str:
        """A plain-text report: a few lines per PE, FIFOs, ports, totals and bandwidth. With
        every symbol given it prints numbers, otherwise the expressions."""
        v = self._values(symbols) if symbols else None

        def show(expr):
            if v is None:
                return str(sympy.sympify(expr))
            return f'{_num(expr, v):,.0f}'

        given = ', '.join(f'{k}={x}' for k, x in sorted(v.items())) if v else 'symbolic'
        b = self.board
        head = ' '.join(f'{h:>{n}s}' for h, n in (('clock', 6), ('F', 2), ('II', 3), ('DSP', 5), ('LUT', 7), ('FF', 7),
                                                   ('BRAM18', 6)))
        lines = [f'FPGA model of {self.name} on {b.name}, {self.clock_mhz:g} MHz ({given})',
                 f'{"PE":34s} {head}  cycles']
        for p in self.pes:
            lines.append(f'{p.name[:34]:34s} {p.clock_mhz:6g} {p.pumping:2d} {p.ii:3d} {p.dsp:5d} {p.lut:7d} {p.ff:7d} '
                         f'{p.bram18:6d}  {show(p.cycles)}')
            if p.ops:
                lines.append('    ops: ' + ', '.join(f'{k} x{n}' for k, n in sorted(p.ops.items())))
            for lp in p.loops:
                why = '; '.join(f'{r}' for r in lp.ii_reasons) or 'II 1'
                kind = f'pipelined II={lp.ii} depth {lp.depth} ({why})' if lp.pipelined else 'sequential'
                lines.append(f'    loop {lp.label}: trips {show(lp.trips)} [{lp.trips_rule}], {kind}')
        lines.append(f'FIFOs: {len(self.fifos)} ({sum(f.impl == "SRL" for f in self.fifos)} SRL), LUT '
                     f'{sum(f.lut for f in self.fifos)}, FF {sum(f.ff for f in self.fifos)}, BRAM18 '
                     f'{sum(f.bram18 for f in self.fifos)}')
        lines.append(f'm_axi ports: {len(self.ports)}, LUT {sum(p.lut for p in self.ports)}, FF '
                     f'{sum(p.ff for p in self.ports)}, BRAM18 {sum(p.bram18 for p in self.ports)}')
        lines.append(f'Total: DSP {self.dsp}/{b.dsp}, LUT {self.lut}/{b.lut}, FF {self.ff}/{b.ff}, BRAM18 '
                     f'{self.bram18}/{b.bram18}, URAM {self.uram}/{b.uram}')
        for p in self.ports:
            lines.append(f'  {p.array}: read {show(p.read_bytes)} B, written {show(p.write_bytes)} B per call '
                         f'({p.bank[0]} bank {p.bank[1]})')
        if v is None:
            lines.append(f'Cycles: {show(self.cycles)}')
        else:
            r = self.evaluate(**symbols)
            lines.append(f'Cycles: {r["cycles"]:,.0f} = {r["seconds"] * 1e3:.4g} ms (bottleneck {r["bottleneck"]})')
            lines.append(f'Bandwidth: {r["bytes_total"]:,.0f} B per call, {r["gbps_needed"]:.3g} GB/s needed of '
                         f'{r["gbps_board"]:.4g} GB/s on the board; ' + '; '.join(
                             f'{k[0]} bank {k[1]} {e["gbps_needed"]:.3g}/{e["gbps_peak"]:.4g} GB/s'
                             for k, e in r['banks'].items()) + (' (memory-bound)' if r['memory_bound'] else ''))
        lines += [f'note: {n}' for n in self.notes]
        return '\n'.join(lines)


# ---- operations in a tasklet -------------------------------------------------------------
_FREE_CALLS = {'abs', 'fabs', 'float', 'int', 'round', 'floor', 'ceil'}
_EXP_CALLS = {'exp', 'log', 'log2', 'log10', 'tanh', 'sigmoid', 'pow', 'sin', 'cos'}


def _type_class(t) -> Optional[Tuple[str, int]]:
    """(type class, lanes) of a DaCe typeclass; None for void."""
    if t is None:
        return None
    if isinstance(t, dtypes.pointer):
        t = t.base_type
    lanes = t.veclen if isinstance(t, dtypes.vector) else 1
    base = t.base_type if isinstance(t, dtypes.vector) else t
    if base.type is None:
        return None
    if base.type in (dtypes.float16.type, dtypes.float32.type):
        return 'f32', lanes
    if base.type == dtypes.float64.type:
        return 'f64', lanes
    return ('i64' if base.bytes > 4 else 'i32'), lanes


class _Ops:
    """Counts the operations of a Python tasklet and the critical path of its outputs.
    ``ready`` gives the cycle at which each input is available (a missing input never is:
    with one input at 0 the output's time is the latency of the path from that input)."""

    def __init__(self, types: Dict[str, Tuple[str, int]], ready: Dict[str, int]):
        self.types, self.ready = dict(types), dict(ready)
        self.ops: Counter = Counter()
        self.calls: List[str] = []

    def _op(self, kind, t, lanes, times, *inputs):
        live = [r for r in inputs if r is not None]
        if kind is None or t is None:
            return max(live) if live else None
        self.ops[(kind, t)] += lanes * times
        cost = OP_COSTS.get((kind, t))
        lat = cost.latency if cost is not None else 1
        return max(live) + lat * times if live else None

    @staticmethod
    def _promote(a, b):
        if a is None or b is None:
            return a or b
        return (a[0] if _RANK[a[0]] >= _RANK[b[0]] else b[0]), max(a[1], b[1])

    def expr(self, node) -> Tuple[Optional[Tuple[str, int]], Optional[int]]:
        if isinstance(node, ast.Name):
            return self.types.get(node.id), self.ready.get(node.id)
        if isinstance(node, ast.Constant):
            return None, None
        if isinstance(node, ast.Subscript):
            t, r = self.expr(node.value)
            return t, r  # the index is address generation
        if isinstance(node, ast.UnaryOp):
            return self.expr(node.operand)
        if isinstance(node, ast.BinOp):
            (ta, ra), (tb, rb) = self.expr(node.left), self.expr(node.right)
            t = self._promote(ta, tb)
            if t is None:
                return None, None
            literal = isinstance(node.left, ast.Constant) or isinstance(node.right, ast.Constant)
            op = type(node.op)
            if op in (ast.Add, ast.Sub):
                kind = 'add'
            elif op in (ast.Mult, ast.Pow):
                kind = None if (literal and t[0][0] == 'i') else 'mul'
            elif op in (ast.Div, ast.FloorDiv, ast.Mod):
                kind = None if (literal and t[0][0] == 'i') else 'div'
            else:
                kind = 'logic'
            if kind == 'logic':
                self.ops[('logic', t[0])] += t[1]
                return t, max([x for x in (ra, rb) if x is not None], default=None)
            return t, self._op(kind, t[0], t[1], 1, ra, rb)
        if isinstance(node, ast.Compare):
            t, r = self.expr(node.left)
            rs = [r]
            for c in node.comparators:
                tc, rc = self.expr(c)
                t = self._promote(t, tc)
                rs.append(rc)
            out = self._op('cmp', t and t[0], t[1] if t else 1, len(node.comparators), *rs)
            return ('i32', t[1] if t else 1), out
        if isinstance(node, ast.BoolOp):
            parts = [self.expr(x) for x in node.values]
            self.ops[('logic', 'i32')] += len(node.values) - 1
            return ('i32', 1), max([r for _, r in parts if r is not None], default=None)
        if isinstance(node, ast.IfExp):
            _, rt = self.expr(node.test)
            (ta, ra), (tb, rb) = self.expr(node.body), self.expr(node.orelse)
            t = self._promote(ta, tb)
            if t is not None:
                self.ops[('sel', t[0])] += t[1]
            return t, max([x for x in (rt, ra, rb) if x is not None], default=None)
        if isinstance(node, ast.Call):
            fname = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, 'id', '?')
            args = [self.expr(a) for a in node.args]
            t = None
            for ta, _ in args:
                t = self._promote(t, ta)
            rs = [r for _, r in args]
            if t is None or fname in _FREE_CALLS:
                return t, max([r for r in rs if r is not None], default=None)
            if fname in ('max', 'min'):
                out = self._op('cmp', t[0], t[1], len(args) - 1, *rs)
                self.ops[('sel', t[0])] += t[1] * (len(args) - 1)
                return t, out
            if fname in _EXP_CALLS or fname == 'sqrt':
                kind = 'sqrt' if fname == 'sqrt' else 'exp'
                return t, self._op(kind, t[0], t[1], 1, *rs)
            self.calls.append(fname)
            return t, max([r for r in rs if r is not None], default=None)
        return None, None

    def run(self, code: List[ast.stmt]) -> Dict[str, Optional[int]]:
        """Walk the statements; returns the ready time of every assigned name."""
        for stmt in code:
            if isinstance(stmt, ast.Assign):
                t, r = self.expr(stmt.value)
                for tgt in stmt.targets:
                    name = tgt.value.id if isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name) else \
                        getattr(tgt, 'id', None)
                    if name is not None:
                        self.ready[name] = r
                        if t is not None and name not in self.types:
                            self.types[name] = t
            elif isinstance(stmt, ast.AugAssign):
                self.run([ast.Assign(targets=[stmt.target], value=ast.BinOp(left=ast.Name(
                    id=getattr(stmt.target, 'id', None) or stmt.target.value.id), op=stmt.op, right=stmt.value))])
            elif isinstance(stmt, ast.Expr):
                self.expr(stmt.value)
            else:
                for child in ast.iter_child_nodes(stmt):
                    if isinstance(child, ast.stmt):
                        self.run([child])
        return self.ready


def _wcr_kind(wcr: str) -> Optional[str]:
    s = str(wcr)
    if '*' in s:
        return 'mul'
    if 'max' in s or 'min' in s:
        return 'cmp'
    return 'add' if ('+' in s or '-' in s) else None


# ---- walking the SDFG ---------------------------------------------------------------------
@dataclass
class _Loop:
    label: str
    params: frozenset
    reads: Counter = field(default_factory=Counter)
    random_reads: Counter = field(default_factory=Counter)
    writes: Counter = field(default_factory=Counter)
    streams: Counter = field(default_factory=Counter)
    reasons: Dict[str, int] = field(default_factory=dict)
    reads_global: bool = False


@dataclass
class _Ctx:
    sdfg: dace.SDFG
    execs: sympy.Expr  # executions of this level over one call
    copies: int  # spatial copies (enclosing unrolled maps)
    loop: Optional[_Loop] = None  # the pipelined loop this level is inside
    unroll: int = 1  # copies inside that loop
    names: Dict[str, str] = field(default_factory=dict)  # inner data name -> outer
    subs: Dict = field(default_factory=dict)  # inner symbol -> outer expression
    flat_entries: Optional[sympy.Expr] = None  # entries of a pipelined child flattened into its parent


@dataclass
class _PEAcc:
    ops: Counter = field(default_factory=Counter)
    lut: int = _PE_LUT
    ff: int = _PE_FF
    bram18: int = 0
    loops: List[LoopModel] = field(default_factory=list)
    allocated: set = field(default_factory=set)


class _Walker:

    def __init__(self, sdfg: dace.SDFG, pushes_known: Dict[str, sympy.Expr]):
        from dace.libraries.standard import Gearbox
        self.Gearbox = Gearbox
        self.top = sdfg
        self.known = pushes_known
        self.pushes: Dict[str, sympy.Expr] = defaultdict(lambda: sympy.Integer(0))
        self.reads: Dict[str, sympy.Expr] = defaultdict(lambda: sympy.Integer(0))
        self.writes: Dict[str, sympy.Expr] = defaultdict(lambda: sympy.Integer(0))
        self.notes: List[str] = []
        self.aliases: Dict[str, str] = {}
        self.globals: Dict[str, dt.Data] = {}
        self.acc = _PEAcc()

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    @staticmethod
    def out(ctx, expr):
        expr = sympy.sympify(expr)
        if ctx.subs:
            expr = expr.subs({s: ctx.subs[s.name] for s in expr.free_symbols if s.name in ctx.subs})
        return expr

    def outer(self, ctx, name):
        return ctx.names.get(name, name)

    # -- scopes --------------------------------------------------------------------------
    def level(self, ctx, state, items) -> sympy.Expr:
        """Cost of the nodes of one scope level: total cycles over the call, or, inside a
        pipelined loop (``ctx.loop``), the latency they add to one iteration."""
        cost = sympy.Integer(0)
        for n in items:
            if isinstance(n, nodes.MapEntry):
                cost += self.map(ctx, state, n)
            elif isinstance(n, nodes.Tasklet):
                cost += self.tasklet(ctx, state, n)
            elif isinstance(n, nodes.NestedSDFG):
                cost += self.nested(ctx, state, n)
            elif isinstance(n, self.Gearbox):
                cost += self.gearbox(ctx, state, n)
            elif isinstance(n, nodes.LibraryNode):
                self.note(f'library node {n.label} ({type(n).__name__}) is not modelled: expand it first')
            elif isinstance(n, nodes.AccessNode):
                self.allocate(ctx, n)
        return cost

    def innermost(self, state, me) -> bool:
        """DaCe's FPGA ``_is_innermost``: no non-unrolled, non-degenerate map inside."""
        children = state.scope_children()
        todo = list(children[me])
        while todo:
            x = todo.pop()
            if isinstance(x, nodes.MapEntry):
                if not x.map.unroll and _int(x.map.range.num_elements(), 2) != 1:
                    return False
                todo += children[x]
            elif isinstance(x, nodes.NestedSDFG):
                for st in x.sdfg.states():
                    if any(isinstance(y, nodes.MapEntry) and not y.map.unroll for y in st.nodes()):
                        return False
        return True

    def dynamic_total(self, ctx, state, me, dyn) -> Tuple[sympy.Expr, str]:
        """Executions of a dynamic-range map over one call (rules 1 and 2 of the module)."""
        children = state.scope_children()
        # 1. stream conservation
        todo = [(x, sympy.Integer(1)) for x in children[me]]
        while todo:
            x, f = todo.pop()
            if isinstance(x, nodes.MapEntry):
                todo += [(y, f * x.map.range.num_elements()) for y in children[x]]
            elif isinstance(x, nodes.Tasklet):
                for e in state.in_edges(x):
                    src = state.memlet_path(e)[0].src
                    if isinstance(src, nodes.AccessNode) and isinstance(ctx.sdfg.arrays[src.data], dt.Stream):
                        name = self.outer(ctx, src.data)
                        if name in self.known:  # (the first pass does not know them yet)
                            return self.known[name] / self.out(ctx, f), f'pops of {name}'
        # 2. pointer telescoping: P[i]:P[i+1]
        feeds = {e.dst_conn: e.data for e in state.in_edges(me) if e.dst_conn in dyn}
        b, e_, _ = me.map.range.ranges[0]
        bs, es = {s.name for s in sympy.sympify(b).free_symbols}, {s.name for s in sympy.sympify(e_).free_symbols}
        if len(feeds) == 2 and len({m.data for m in feeds.values()}) == 1 and bs & set(feeds) and es & set(feeds):
            lo, hi = feeds[next(iter(bs & set(feeds)))], feeds[next(iter(es & set(feeds)))]
            diff = sympy.simplify(sympy.sympify(hi.subset.min_element()[0]) - sympy.sympify(lo.subset.min_element()[0]))
            if diff == 1:
                param = me.map.params[0]
                for x in state.scope_subgraph(me).nodes():
                    if not isinstance(x, nodes.Tasklet):
                        continue
                    for ed in state.in_edges(x):
                        if ed.data.data and str(ed.data.subset.min_element()[0]) == param:
                            length = self.out(ctx, ctx.sdfg.arrays[ed.data.data].shape[0])
                            if isinstance(length, sympy.Symbol):
                                self.aliases.setdefault('nnz', length.name)
                            return length, f'{self.outer(ctx, lo.data)}[i]:{self.outer(ctx, lo.data)}[i+1] telescopes'
        sym = sympy.Symbol(f'{me.map.label}_trips')
        self.note(f'the trips of dynamic map {me.map.label} over one call are a new symbol {sym}')
        return sym, 'unknown'

    def map(self, ctx, state, me) -> sympy.Expr:
        children = [x for x in state.scope_children()[me] if not isinstance(x, nodes.ExitNode)]
        size = self.out(ctx, me.map.range.num_elements())
        dyn = {c for c in me.in_connectors if not c.startswith('IN_')}
        dynamic = bool({s.name for s in sympy.sympify(me.map.range.num_elements()).free_symbols} & dyn)
        fetch = 0  # reads of dynamic-range inputs (row pointers): one memory latency per start of the map
        for e in state.in_edges(me):
            if e.dst_conn in dyn and self.access(ctx, state, e, None, (), reads=True)[0]:
                fetch = MAXI_LATENCY
        start = ctx.execs / ctx.copies * fetch if ctx.loop is None else sympy.Integer(fetch)
        if _int(size, 2) == 1:
            return start + self.level(ctx, state, children)
        if me.map.unroll:
            n = _int(size, 1)
            if n == 1 and size != 1:
                self.note(f'unrolled map {me.map.label} has a symbolic size; counted as one copy')
            return start + self.level(replace(ctx, execs=ctx.execs * size, copies=ctx.copies * n,
                                              unroll=ctx.unroll * n, flat_entries=None), state, children)
        if ctx.loop is not None:
            self.note(f'map {me.map.label} inside pipelined loop {ctx.loop.label}: taken as a sequential loop')
            return start + self.level(replace(ctx, execs=ctx.execs * size), state, children) * size
        total, rule = self.dynamic_total(ctx, state, me, dyn) if dynamic else (ctx.execs * size, 'range')
        if dynamic and isinstance(ctx.execs, sympy.Symbol):  # a per-row loop: its parent runs over the rows
            self.aliases.setdefault('rows', ctx.execs.name)
        entries = ctx.flat_entries if ctx.flat_entries is not None else ctx.execs / ctx.copies
        if self.innermost(state, me):
            loop = _Loop(me.map.label, frozenset(me.map.params))
            lat = self.level(replace(ctx, execs=total, loop=loop, unroll=1, flat_entries=None), state, children)
            ii = self.loop_ii(loop)
            depth = 1 + _int(lat, 1) + (MAXI_LATENCY if loop.reads_global else 0)
            cycles = total / ctx.copies * ii + entries * depth
            self.acc.loops.append(LoopModel(me.map.label, True, total, entries, ii, depth, cycles, loop.reasons, rule))
            self.acc.lut += _LOOP_LUT
            self.acc.ff += _LOOP_FF
            return start + cycles
        work = [x for x in children if not isinstance(x, nodes.AccessNode)]
        flat = (len(work) == 1 and isinstance(work[0], nodes.MapEntry) and not work[0].map.unroll
                and self.innermost(state, work[0])
                and not {c for c in work[0].in_connectors if not c.startswith('IN_')})
        body = self.level(replace(ctx, execs=total, flat_entries=entries if flat else None), state, children)
        overhead = 0 if flat else total / ctx.copies
        self.acc.loops.append(LoopModel(me.map.label, False, total, entries, 1, 0, body + overhead, {}, rule))
        self.acc.lut += _LOOP_LUT
        self.acc.ff += _LOOP_FF
        return start + body + overhead

    def loop_ii(self, loop: _Loop) -> int:
        for arr, n in loop.reads.items():
            if n > 1:
                loop.reasons[f'{n} reads of {arr} per iteration (one m_axi port)'] = n
        for arr, n in loop.random_reads.items():
            ii = math.ceil(n * MAXI_LATENCY / MAXI_OUTSTANDING)
            loop.reasons[f'{n} random reads of {arr} per iteration ({MAXI_OUTSTANDING} in flight over '
                         f'{MAXI_LATENCY} cycles)'] = ii
        for arr, n in loop.writes.items():
            if n > 1:
                loop.reasons[f'{n} writes of {arr} per iteration'] = n
        for s, n in loop.streams.items():
            if n > 1:
                loop.reasons[f'{n} accesses of FIFO {s} per iteration'] = n
        return max(loop.reasons.values(), default=1)

    # -- nodes ---------------------------------------------------------------------------
    def access(self, ctx, state, e, code_tree, inputs, reads: bool, conn=None) -> Tuple[bool, bool]:
        """Count one memlet of a tasklet (or a dynamic map input): global traffic, FIFO
        pushes/pops, per-iteration port use. Returns (global read, random read)."""
        path = state.memlet_path(e)
        node = path[0].src if reads else path[-1].dst
        if not isinstance(node, nodes.AccessNode) or e.data.data is None:
            return False, False
        desc = ctx.sdfg.arrays[node.data]
        name = self.outer(ctx, node.data)
        if isinstance(desc, dt.Stream):
            if not reads:
                self.pushes[name] += ctx.execs
            if ctx.loop is not None:
                ctx.loop.streams[name] += ctx.unroll
            return False, False
        if desc.storage != dtypes.StorageType.FPGA_Global:
            return False, False
        vol = self.out(ctx, e.data.volume)
        elems, random = vol, False
        if _int(vol, 2) != 1 and code_tree is not None and conn is not None:
            subs = [s for s in ast.walk(code_tree) if isinstance(s, ast.Subscript)
                    and isinstance(s.value, ast.Name) and s.value.id == conn]
            if subs:
                elems = sympy.Integer(len(subs))
                random = any(isinstance(x, ast.Name) and x.id in inputs for s in subs for x in ast.walk(s.slice))
        self.globals.setdefault(name, desc)
        nbytes = ctx.execs * elems * desc.dtype.bytes
        if reads or e.data.wcr is not None:
            self.reads[name] += nbytes
        if not reads:
            self.writes[name] += nbytes
        if ctx.loop is not None:
            n = _int(elems, 1) * ctx.unroll
            if reads or e.data.wcr is not None:
                (ctx.loop.random_reads if random else ctx.loop.reads)[name] += n
                ctx.loop.reads_global = True
            if not reads:
                ctx.loop.writes[name] += n
        return reads or e.data.wcr is not None, random

    def conn_types(self, ctx, state, t) -> Dict[str, Tuple[str, int]]:
        types = {}
        for conns, edges, attr in ((t.in_connectors, state.in_edges(t), 'dst_conn'),
                                   (t.out_connectors, state.out_edges(t), 'src_conn')):
            for e in edges:
                c = getattr(e, attr)
                if c is None:
                    continue
                tc = _type_class(conns.get(c))
                if tc is None and e.data.data is not None:
                    tc = _type_class(ctx.sdfg.arrays[e.data.data].dtype)
                if tc is not None:
                    types[c] = tc
        return types

    def tasklet(self, ctx, state, t) -> sympy.Expr:
        if t.language != dtypes.Language.Python:
            self.note(f'tasklet {t.label} is {t.language.name}: its operations are not counted')
            code = None
        else:
            code = ast.Module(body=list(t.code.code), type_ignores=[])
        inputs = set(t.in_connectors)
        types = self.conn_types(ctx, state, t)
        counter = _Ops(types, {c: 0 for c in t.in_connectors})
        ready = counter.run(code.body) if code is not None else {}
        for fname in counter.calls:
            self.note(f'call {fname}() in tasklet {t.label} is not modelled (no cost)')
        for (kind, cls), lanes in counter.ops.items():
            self.acc.ops[f'{kind}.{cls}'] += lanes * ctx.copies
        for e in state.out_edges(t):  # a write-conflict resolution is an operator too
            tc = _type_class(ctx.sdfg.arrays[e.data.data].dtype) if e.data.data and e.data.wcr is not None else None
            if tc is not None and _wcr_kind(e.data.wcr):
                self.acc.ops[f'{_wcr_kind(e.data.wcr)}.{tc[0]}'] += tc[1] * ctx.copies
        reads_global = False
        for e in state.in_edges(t):
            g, _ = self.access(ctx, state, e, code, inputs, True, e.dst_conn)
            reads_global |= g
        for e in state.out_edges(t):
            g, _ = self.access(ctx, state, e, code, inputs, False, e.src_conn)
            reads_global |= g
        if ctx.loop is not None and code is not None:
            self.recurrences(ctx, state, t, code, types)
        lat = max([r for c, r in ready.items() if c in t.out_connectors and r is not None], default=0)
        lat = max(1, lat) + (MAXI_LATENCY if reads_global and ctx.loop is None else 0)
        return sympy.Integer(lat) if ctx.loop is not None else ctx.execs / ctx.copies * lat

    def recurrences(self, ctx, state, t, code, types):
        """Loop-carried updates of one element inside the pipelined loop ``ctx.loop``."""
        for oe in state.out_edges(t):
            if oe.data.data is None or isinstance(ctx.sdfg.arrays[oe.data.data], dt.Stream):
                continue
            desc = ctx.sdfg.arrays[oe.data.data]
            lat = None
            if oe.data.wcr is not None:
                kind, tc = _wcr_kind(oe.data.wcr), _type_class(desc.dtype)
                lat = OP_COSTS[(kind, tc[0])].latency if kind and tc else 1
                what = f'WCR {kind}'
            else:
                for ie in state.in_edges(t):
                    if ie.data.data == oe.data.data and str(ie.data.subset) == str(oe.data.subset):
                        ready = _Ops(types, {ie.dst_conn: 0}).run(code.body)
                        if ready.get(oe.src_conn) is not None:
                            lat, what = max(1, ready[oe.src_conn]), f'{ie.dst_conn} -> {oe.src_conn}'
            if lat is None:
                continue
            dist = 1
            for idx in oe.data.subset.min_element():
                idx = sympy.sympify(idx)
                if not {s.name for s in idx.free_symbols} & ctx.loop.params:
                    continue
                mods = [m for m in idx.atoms(sympy.Mod) if {s.name for s in m.free_symbols} & ctx.loop.params]
                if not mods or not mods[0].args[1].is_Integer:
                    dist = None  # a new element every iteration: no recurrence
                    break
                dist *= int(mods[0].args[1])
            if dist is None:
                continue
            if desc.storage == dtypes.StorageType.FPGA_Global:
                lat += MAXI_LATENCY
            elif desc.storage == dtypes.StorageType.FPGA_Local:
                lat += _LOCAL_LATENCY
            ii = math.ceil(lat / dist)
            name = self.outer(ctx, oe.data.data)
            ctx.loop.reasons[f'recurrence on {name} ({what}, {lat} cycles over {dist} element(s))'] = ii

    def gearbox(self, ctx, state, g) -> sympy.Expr:
        ie, oe = state.in_edges(g)[0], state.out_edges(g)[0]
        din, dout = ctx.sdfg.arrays[ie.data.data], ctx.sdfg.arrays[oe.data.data]
        wide, narrow = (din, dout) if din.veclen >= dout.veclen else (dout, din)
        gear = max(1, wide.veclen // max(1, narrow.veclen))
        size = self.out(ctx, g.size)
        trips = ctx.execs * size * gear
        self.pushes[self.outer(ctx, oe.data.data)] += ctx.execs * size * (1 if dout is wide else gear)
        if ctx.loop is not None:
            ctx.loop.streams[self.outer(ctx, ie.data.data)] += ctx.unroll
        depth = 2
        cycles = trips + depth * ctx.execs
        self.acc.loops.append(LoopModel(g.label, True, trips, ctx.execs, 1, depth, cycles, {}, 'gearbox size x factor'))
        wb, nb = wide.dtype.bytes * 8, narrow.dtype.bytes * 8
        self.acc.lut += wb + _LOOP_LUT
        self.acc.ff += wb + nb + _LOOP_FF
        return cycles

    def nested(self, ctx, state, n) -> sympy.Expr:
        names = {}
        for e in state.in_edges(n) + state.out_edges(n):
            conn = e.dst_conn if e.dst is n else e.src_conn
            if conn and e.data.data:
                names[conn] = self.outer(ctx, e.data.data)
        subs = {str(k): self.out(ctx, dace.symbolic.pystr_to_symbolic(str(v))) for k, v in n.symbol_mapping.items()}
        return self.region(replace(ctx, sdfg=n.sdfg, names=names, subs=subs), n.sdfg)

    def region(self, ctx, region) -> sympy.Expr:
        from dace.sdfg.state import ConditionalBlock, LoopRegion
        cost = sympy.Integer(0)
        for block in region.nodes():
            if isinstance(block, dace.SDFGState):
                top = [x for x in block.scope_children()[None] if not isinstance(x, nodes.ExitNode)]
                cost += self.level(ctx, block, top)
            elif isinstance(block, LoopRegion):
                from dace.transformation.passes.analysis import loop_analysis as la
                b, e, s = la.get_init_assignment(block), la.get_loop_end(block), la.get_loop_stride(block)
                if None in (b, e, s):
                    trips = sympy.Symbol(f'{block.label}_trips')
                    self.note(f'the trips of loop {block.label} are a new symbol {trips}')
                else:
                    trips = self.out(ctx, (sympy.sympify(e) - sympy.sympify(b)) / sympy.sympify(s) + 1)
                body = self.region(replace(ctx, execs=ctx.execs * trips), block)
                cost += body * (trips if ctx.loop is not None else 1) + (0 if ctx.loop is not None else
                                                                           ctx.execs * trips / ctx.copies)
            elif isinstance(block, ConditionalBlock):
                branches = [self.region(ctx, body) for _, body in block.branches]
                cost += sympy.Max(*branches) if branches else 0
            elif hasattr(block, 'nodes'):
                cost += self.region(ctx, block)
        return cost

    def allocate(self, ctx, n):
        desc = ctx.sdfg.arrays[n.data]
        key = (id(ctx.sdfg), n.data)
        if key in self.acc.allocated or not desc.transient or isinstance(desc, dt.Stream):
            return
        self.acc.allocated.add(key)
        bits = desc.dtype.bytes * 8
        count = _int(desc.total_size, 0)
        if desc.storage == dtypes.StorageType.FPGA_Registers or (isinstance(desc, dt.Scalar) and desc.storage in (
                dtypes.StorageType.FPGA_Local, dtypes.StorageType.Register)):
            self.acc.ff += bits * count
            if count > 1:
                self.acc.lut += bits * math.ceil(count / 4)  # read multiplexer
        elif desc.storage in (dtypes.StorageType.FPGA_Local, dtypes.StorageType.FPGA_ShiftRegister):
            if count == 0:
                self.note(f'local array {n.data} has a symbolic size: its memory is not counted')
            elif bits * count <= _LUTRAM_BITS:
                self.acc.lut += math.ceil(bits * count / 64)
            else:
                self.acc.bram18 += _bram18(count, bits)

    # -- PEs and states ------------------------------------------------------------------
    def pe_name(self, state, top) -> str:
        parts = []
        for n in top:
            if isinstance(n, self.Gearbox):
                parts.append(f'gearbox({state.in_edges(n)[0].data.data}->{state.out_edges(n)[0].data.data})')
            elif isinstance(n, nodes.MapEntry):
                parts.append(n.map.label)
            elif isinstance(n, (nodes.Tasklet, nodes.NestedSDFG, nodes.LibraryNode)):
                parts.append(n.label)
        return '+'.join(parts) or '?'

    def pumping(self, state, sg) -> int:
        gears = []
        streams = {n.data for n in sg.nodes() if isinstance(n, nodes.AccessNode)}
        for g in state.nodes():
            if isinstance(g, self.Gearbox):
                touched = {e.data.data for e in state.in_edges(g) + state.out_edges(g)}
                if g in sg.nodes() or touched & streams:
                    din = self.top.arrays[state.in_edges(g)[0].data.data]
                    dout = self.top.arrays[state.out_edges(g)[0].data.data]
                    gears.append(max(din.veclen, dout.veclen) // max(1, min(din.veclen, dout.veclen)))
        if gears:
            return max(gears)
        self.note(f'multi-pumped PE in {state.label} has no Gearbox: factor {_DEFAULT_PUMP} assumed')
        return _DEFAULT_PUMP

    def pe(self, state, sg, clock_mhz) -> Optional[PEModel]:
        members = set(sg.nodes())
        top = [n for n in state.scope_children()[None] if n in members and not isinstance(n, nodes.ExitNode)]
        if not any(isinstance(n, (nodes.MapEntry, nodes.CodeNode)) for n in top):
            return None
        pumped = any(getattr(n, 'schedule', None) == dtypes.ScheduleType.FPGA_Multi_Pumped for n in members)
        f = self.pumping(state, sg) if pumped else 1
        if clock_mhz * f > _FABRIC_MHZ:
            self.note(f'a PE pumped by {f} runs at {clock_mhz * f:g} MHz: beyond what UltraScale+ fabric usually '
                      f'closes (~{_FABRIC_MHZ} MHz); the model does not check timing')
        self.acc = _PEAcc()
        cycles = self.level(_Ctx(self.top, sympy.Integer(1), 1), state, top)
        ops = dict(self.acc.ops)
        dsp = sum(OP_COSTS[(k.split('.')[0], k.split('.')[1])].dsp * n for k, n in ops.items()
                  if tuple(k.split('.')) in OP_COSTS)
        lut, ff = self.acc.lut, self.acc.ff
        for k, n in ops.items():
            kind, cls = k.split('.')
            if (kind, cls) in OP_COSTS:
                lut += OP_COSTS[(kind, cls)].lut * n
                ff += OP_COSTS[(kind, cls)].ff * n
            else:  # logic, select: a LUT per bit
                lut += _BITS[cls] * n
        loops = self.acc.loops
        piped = [lp for lp in loops if lp.pipelined]
        return PEModel(name=self.pe_name(state, top), state=state.label,
                       schedule='FPGA_Multi_Pumped' if pumped else 'FPGA_Device', pumping=f,
                       clock_mhz=clock_mhz * f, loops=loops, trips=sympy.Add(*[lp.trips for lp in piped]),
                       ii=max([lp.ii for lp in piped], default=1), ops=ops, dsp=dsp, lut=lut, ff=ff,
                       bram18=self.acc.bram18, uram=0, cycles=sympy.simplify(cycles / f),
                       depth=math.ceil(max([lp.depth for lp in piped], default=0) / f))

    def state(self, state, clock_mhz):
        pes = [p for sg in dace.sdfg.concurrent_subgraphs(state) for p in [self.pe(state, sg, clock_mhz)] if p]
        seen = Counter(p.name for p in pes)
        index = Counter()
        for p in pes:
            if seen[p.name] > 1:
                index[p.name] += 1
                p.name = f'{p.name}#{index[p.name]}'
        fifos, used = [], set()
        for n in state.data_nodes():
            desc = self.top.arrays[n.data]
            if isinstance(desc, dt.Stream) and desc.transient and n.data not in used:
                used.add(n.data)
                depth, bits = max(1, _int(desc.buffer_size, 1)), desc.dtype.bytes * 8
                if depth <= SRL_MAX_DEPTH:
                    fifos.append(FifoModel(n.data, depth, bits, 'SRL', bits * math.ceil(depth / 32) + 16, bits + 16, 0))
                else:
                    fifos.append(FifoModel(n.data, depth, bits, 'BRAM', 30, 40, _bram18(depth, bits)))
        cycles = sympy.Max(*[p.cycles for p in pes]) + sum(p.depth for p in pes) if pes else sympy.Integer(0)
        return pes, fifos, cycles


def _kernel_states(sdfg) -> list:
    states = sdfg.all_states() if hasattr(sdfg, 'all_states') else sdfg.states()
    return [st for st in states if dace.sdfg.utils.is_fpga_kernel(sdfg, st)
            and any(not isinstance(n, nodes.AccessNode) for n in st.nodes())]


def _bank(desc, board: Board) -> Tuple[str, str]:
    loc = getattr(desc, 'location', None) or {}
    if 'memorytype' in loc:
        return str(loc['memorytype']).upper(), str(loc.get('bank', '0'))
    return board.default_memory, '0'


def model_design(sdfg: dace.SDFG, board: str = 'u280', clock_mhz: float = 300) -> DesignModel:
    """Model the FPGA design ``sdfg`` (a lowered SDFG with FPGA kernel states) on ``board``
    (a key of :data:`BOARDS`) at ``clock_mhz`` (the base clock; multi-pumped PEs run at a
    multiple). Pure: the SDFG is only read.

    Raises :class:`~sdfgsparse.errors.ArgumentError` for an unknown board and
    :class:`~sdfgsparse.errors.UnsupportedOperationError` for an SDFG without FPGA kernels."""
    if board not in BOARDS:
        raise errors.ArgumentError(f'model_design: board={board!r} is not one of {sorted(BOARDS)}')
    if not clock_mhz or clock_mhz <= 0:
        raise errors.ArgumentError(f'model_design: clock_mhz={clock_mhz!r} must be a positive number of MHz')
    kernels = _kernel_states(sdfg)
    if not kernels:
        raise errors.UnsupportedOperationError(f'model_design: {sdfg.name} has no FPGA kernel state (lower it with '
                                               'sdfgsparse.targets.fpga.to_fpga first)')
    known: Dict[str, sympy.Expr] = {}
    for _ in range(8):  # dynamic loops need their producers' pushes: iterate until they settle
        w = _Walker(sdfg, known)
        results = [w.state(st, clock_mhz) for st in kernels]
        pushes = {k: sympy.simplify(v) for k, v in w.pushes.items()}
        if pushes == known:
            break
        known = pushes
    pes = [p for r in results for p in r[0]]
    if len(kernels) > 1:
        for p in pes:
            p.name = f'{p.state}/{p.name}'
    fifos = [f for r in results for f in r[1]]
    ports = []
    for name in sorted(set(w.reads) | set(w.writes)):
        desc = sdfg.arrays.get(name, w.globals[name])
        bits = desc.dtype.bytes * 8
        rd, wr = sympy.simplify(w.reads.get(name, 0)), sympy.simplify(w.writes.get(name, 0))
        lut = ff = bram = 0
        for used in (rd != 0, wr != 0):
            if used:
                lut, ff = lut + 300 + bits, ff + 500 + 2 * bits
                bram += _bram18(MAXI_OUTSTANDING * MAXI_BURST, bits)
        ports.append(PortModel(name, rd, wr, bits, _bank(desc, BOARDS[board]), lut, ff, bram))
    exprs = [r[2] for r in results] + [p.read_bytes + p.write_bytes for p in ports]
    names = {s.name for e in exprs for s in sympy.sympify(e).free_symbols}
    aliases = {a: n for a, n in w.aliases.items() if n in names}
    for alias, cands in (('nnz', ('NNZ', 'nnz')), ('rows', ('M', 'rows')), ('cols', ('N', 'cols')), ('k', ('K', 'k'))):
        hit = next((c for c in cands if c in names), None)
        contains = [n for n in names if alias in n.lower()]  # e.g. the streaming design's '<kernel>_nnz'
        hit = hit or (contains[0] if len(contains) == 1 else None)
        if hit and alias not in aliases:
            aliases[alias] = hit
    return DesignModel(name=sdfg.name, board=BOARDS[board], clock_mhz=float(clock_mhz), pes=pes, fifos=fifos,
                       ports=ports, state_cycles=[r[2] for r in results], aliases=aliases, notes=w.notes,
                       sdfg_symbols=sorted(str(x) for x in sdfg.free_symbols))
