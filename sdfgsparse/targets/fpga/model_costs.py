"""Cost tables and constants of the FPGA model (:mod:`sdfgsparse.targets.fpga.model`).

What one operator, FIFO, memory or ``m_axi`` port costs on a Xilinx UltraScale+ device
under Vitis HLS's defaults, and the Alveo boards a design is measured against, each number
with its source (or marked as an assumption). They are kept apart from the SDFG walker
(:mod:`~sdfgsparse.targets.fpga.model_walk`) so that a table can be read, checked or
re-tuned without touching the rules that count operations, trips and cycles; the public
names are re-exported by :mod:`sdfgsparse.targets.fpga.model`.
"""
import math
from dataclasses import dataclass
from typing import Dict, Tuple

__all__ = ['OpCost', 'OP_COSTS', 'MAXI_LATENCY', 'MAXI_OUTSTANDING', 'MAXI_BURST', 'SRL_MAX_DEPTH', 'Board', 'BOARDS']


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


def _bram18(depth: int, bits: int) -> int:
    """BRAM18s of a ``depth`` x ``bits`` memory: by capacity, or by width (36 bits a block)."""
    return max(math.ceil(depth * bits / _BRAM18_BITS), math.ceil(bits / _BRAM18_WIDTH))
