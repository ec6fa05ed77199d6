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

This module is the public API: :func:`model_design`, the :class:`DesignModel` it returns and
its records (:class:`PEModel`, :class:`LoopModel`, :class:`FifoModel`, :class:`PortModel`).
The cost tables and constants (:data:`OP_COSTS`, :data:`BOARDS`, ``MAXI_*`` ...) live in
:mod:`~sdfgsparse.targets.fpga.model_costs` and the SDFG walker that applies the rules below
in :mod:`~sdfgsparse.targets.fpga.model_walk` (which also defines the PE, loop and FIFO
records it produces); their public names are re-exported here.

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
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import dace
import sympy

from sdfgsparse import errors
from sdfgsparse.targets.fpga.model_costs import (BOARDS, MAXI_BURST, MAXI_LATENCY, MAXI_OUTSTANDING, OP_COSTS,
                                                 SRL_MAX_DEPTH, Board, OpCost, _bram18)
from sdfgsparse.targets.fpga.model_walk import (FifoModel, LoopModel, PEModel, _bank, _kernel_states, _simplify,
                                                _Walker)

__all__ = ['model_design', 'DesignModel', 'PEModel', 'LoopModel', 'FifoModel', 'PortModel', 'Board', 'BOARDS',
           'OpCost', 'OP_COSTS', 'MAXI_LATENCY', 'MAXI_OUTSTANDING', 'MAXI_BURST', 'SRL_MAX_DEPTH']


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
        pushes = {k: _simplify(v) for k, v in w.pushes.items()}
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
        rd, wr = _simplify(sympy.sympify(w.reads.get(name, 0))), _simplify(sympy.sympify(w.writes.get(name, 0)))
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
