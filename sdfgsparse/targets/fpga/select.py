"""The streaming design an FPGA program gets: vector width ``W``, accumulators ``P`` and
multi-pumping factor ``F``, chosen with the resource and performance model
(:mod:`.model`) of the design as it is generated.

Each candidate is the streaming SpMM (or SDDMM, when the program's widest operation is
one) of the program's value and index types, lowered with that design
(:func:`.lower.to_fpga`) and modelled (cached per process: the SDFG does not depend on the
sizes), then evaluated at the sizes of that operation (the caller's example matrices, or
:data:`DEFAULT_SIZES`). The choice:

1. the shortest modelled time on the board, among candidates that fit its DSPs, LUTs and
   BRAM, with a pumped clock (``F`` times the kernel clock) at most :data:`FABRIC_MHZ`;
2. within 2 % of that time, the fewest DSPs (this is where pumping wins: the multiply
   element's DSPs fall by ``F`` at equal throughput), then the fewest LUTs.

The report lists every candidate with its modelled time, bottleneck element and DSPs, and
says which rule decided.
"""
import copy
import dataclasses
import functools
import math
import threading
from typing import Dict, List, Optional, Tuple

import dace

from sdfgsparse.targets.fpga.streaming import Design

__all__ = ['choose_design', 'Choice', 'DEFAULT_SIZES', 'FABRIC_MHZ', 'candidates']

#: Sizes of the modelled SpMM when the caller gives no example matrices.
DEFAULT_SIZES = {'rows': 100000, 'cols': 100000, 'nnz': 1000000, 'k': 16}
#: Highest clock taken for a pumped element (an UltraScale+ fabric rarely closes above it).
FABRIC_MHZ = 650
_TIE = 0.02
_LOCK = threading.Lock()


@dataclasses.dataclass
class Choice:
    """The chosen design and how: ``rows`` has one dict per candidate (``design``,
    ``seconds``, ``cycles``, ``bottleneck``, ``dsp``, ``lut``, ``fits``, ``why_not``)."""
    design: Design
    sizes: Dict[str, int]
    board: str
    clock_mhz: float
    rule: str
    rows: List[dict]
    op: str = 'spmm'

    def report(self) -> str:
        op = {'spmm': 'SpMM', 'sddmm': 'SDDMM'}[self.op]
        lines = [f'FPGA design for an {op} of {self.sizes["rows"]} x {self.sizes["cols"]}, '
                 f'{self.sizes["nnz"]} entries, K = {self.sizes["k"]} on {self.board} at {self.clock_mhz:g} MHz:',
                 f'  {"W":>3} {"P":>3} {"F":>2} {"modelled":>11} {"DSP":>5} {"LUT":>8}  bottleneck / why not']
        for r in sorted(self.rows, key=lambda r: (r['why_not'] != '', r['seconds'])):
            d = r['design']
            mark = '*' if d == self.design else ' '
            lines.append(f'{mark} {d.vector_width:>3} {d.accumulators:>3} {d.pumping:>2} {r["seconds"] * 1e3:>9.3f}ms '
                         f'{r["dsp"]:>5} {r["lut"]:>8}  {r["why_not"] or r["bottleneck"]}')
        lines.append(f'  chosen W={self.design.vector_width}, P={self.design.accumulators}, '
                     f'pumping {self.design.pumping}: {self.rule}')
        return '\n'.join(lines)


def candidates(k: int) -> List[Design]:
    """The designs tried for dense width ``k``: vector widths up to ``k`` (rounded up to a
    power of two, at most 16); for each, the accumulators of one pass over ``k`` and 8
    (enough partial sums to hide a float adder's latency); pumping by 2 and 4 of each."""
    kp = 1 << max(0, math.ceil(math.log2(max(1, k))))
    out = []
    for w in (1, 2, 4, 8, 16):
        if w > max(2, kp):
            break
        for p in sorted({max(1, min(8, -(-kp // w))), 8}):
            for f in (1, 2, 4):
                if w % f == 0 and (f == 1 or w >= 2):
                    out.append(Design(vector_width=w, accumulators=p, pumping=f))
    return out


@functools.lru_cache(maxsize=None)
def _probe(vt: str, it: str, op: str = 'spmm') -> dace.SDFG:
    """An SpMM (or SDDMM) program of the value and index types (parsed once per process)."""
    import sdfgsparse as ss
    V, I = getattr(dace, vt), getattr(dace, it)
    M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
    csr = ss.CSR[V, M, N, I]

    @dace.program
    def fpga_design_probe(A: csr, B: V[N, K]):
        return A @ B

    @dace.program
    def fpga_design_probe_sddmm(A: csr, X: V[M, K], Y: V[K, N]):
        return ss.sddmm(A, X, Y)

    return (fpga_design_probe_sddmm if op == 'sddmm' else fpga_design_probe).to_sdfg()


@functools.lru_cache(maxsize=256)
def _model(vt: str, it: str, design: Design, board: str, clock_mhz: float, op: str = 'spmm'):
    from sdfgsparse.targets.fpga.lower import to_fpga
    from sdfgsparse.targets.fpga.model import model_design
    with _LOCK:  # (the cache does not keep two threads from modelling the same candidate)
        sdfg = copy.deepcopy(_probe(vt, it, op))
        return model_design(to_fpga(sdfg, design), board=board, clock_mhz=clock_mhz)


def _evaluate(model, sizes: Dict[str, int]) -> dict:
    """The model of a program whose sizes are the symbols M, N and K (the probes and the
    bench programs; any other symbol counts entries) at ``sizes``."""
    values = {}
    for s in model.symbols:
        name = str(s)
        values[name] = {'M': sizes['rows'], 'N': sizes['cols'], 'K': sizes['k']}.get(name, sizes['nnz'])
    return model.evaluate(**values)


def choose_design(vt: str = 'float32', it: str = 'int32', sizes: Optional[Dict[str, int]] = None,
                  board: str = 'u280', clock_mhz: float = 300, op: str = 'spmm') -> Choice:
    """The design of an SpMM (``op='sddmm'``: an SDDMM) with values ``vt`` and indices
    ``it`` at ``sizes`` (``rows``, ``cols``, ``nnz``, ``k``; :data:`DEFAULT_SIZES` for
    those missing) on ``board``; see the module for the rule."""
    if op not in ('spmm', 'sddmm'):
        raise ValueError(f'choose_design: op must be spmm or sddmm, got {op!r}')
    sizes = {**DEFAULT_SIZES, **{k: int(v) for k, v in (sizes or {}).items() if v is not None}}
    rows = []
    for design in candidates(sizes['k']):
        m = _model(vt, it, design, board, float(clock_mhz), op)
        e = _evaluate(m, sizes)
        why = ''
        over = [f'{r} {u:.0%}' for r, u in e['utilisation'].items() if u > 1]
        if over:
            why = 'does not fit: ' + ', '.join(over)
        elif design.pumping * clock_mhz > FABRIC_MHZ:
            why = f'pumped clock {design.pumping * clock_mhz:g} MHz above {FABRIC_MHZ} MHz'
        rows.append(dict(design=design, seconds=e['seconds'], cycles=e['cycles'], bottleneck=e['bottleneck'],
                         dsp=int(e['dsp']), lut=int(e['lut']), why_not=why))
    fit = [r for r in rows if not r['why_not']]
    if not fit:
        best = min(rows, key=lambda r: r['dsp'])
        return Choice(best['design'], sizes, board, clock_mhz, 'no candidate fits the board: the fewest DSPs',
                      rows, op)
    fastest = min(fit, key=lambda r: r['seconds'])
    near = [r for r in fit if r['seconds'] <= fastest['seconds'] * (1 + _TIE)]
    best = min(near, key=lambda r: (r['dsp'], r['lut'], r['seconds']))
    if best is fastest:
        rule = f'the shortest modelled time ({fastest["seconds"] * 1e3:.3f} ms, bottleneck {fastest["bottleneck"]})'
    else:
        rule = (f'within {_TIE:.0%} of the shortest modelled time ({fastest["seconds"] * 1e3:.3f} ms) with the fewest '
                f'DSPs ({best["dsp"]} against {fastest["dsp"]})')
        if best['design'].pumping > 1:
            f = best['design'].pumping
            rule += f': the multiply element pumped by {f} at {f * clock_mhz:g} MHz'
    return Choice(best['design'], sizes, board, clock_mhz, rule, rows, op)


def program_sizes(sdfg: dace.SDFG, matrices=None) -> Tuple[Optional[str], Optional[str], Dict[str, int], str,
                                                            Dict[str, str]]:
    """(value type, index type, sizes, ``'spmm'`` or ``'sddmm'``, size -> symbol) of the
    SpMM or SDDMM of ``sdfg`` with the widest dense operand among the example ``matrices``
    (name -> value). Its sizes come from its own operands where the examples give them
    (``k`` from its dense operand, ``rows``/``cols``/``nnz`` from its sparse one); a size
    is missing where they do not. The last item names the symbols of ``rows``, ``cols``
    and ``k`` where they are symbols. (None, None, {}, '', {}) without either operation."""
    import numpy as np
    from sdfgsparse.ops.sddmm import SDDMM
    from sdfgsparse.ops.spmm import SpMM
    matrices = matrices or {}
    found = []
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, (SpMM, SDDMM)):
            conn, prefix = ('_B', 'A') if isinstance(node, SpMM) else ('_X', 'S')
            b = next(e for e in state.in_edges(node) if e.dst_conn == conn).data.data.split('.')[0]
            k = getattr(matrices.get(b), 'shape', (None, None))[-1]
            if k is None:
                shape_k = node.connected(state, conn).shape[-1]
                k = int(shape_k) if dace.symbolic.issymbolic(shape_k) is False or isinstance(shape_k, int) else None
            a = next(e for e in state.in_edges(node) if e.dst_conn.startswith(f'_{prefix}_')).src
            a = next((e.src.data for e in state.in_edges(a) if isinstance(e.src, dace.nodes.AccessNode)), a.data)
            found.append((k or 0, isinstance(node, SDDMM), node.operand_type(state, prefix),
                          node.connected(state, conn).shape[-1], a))
    if not found:
        return None, None, {}, '', {}
    k, sddmm, st, kexpr, a = max(found, key=lambda f: f[:2])
    sizes = {'k': k} if k else {}
    value = matrices.get(a)
    if value is not None and hasattr(value, 'nnz') and len(getattr(value, 'shape', ())) == 2:
        sizes.update(rows=int(value.shape[0]), cols=int(value.shape[1]), nnz=int(value.nnz))
    names = {key: str(x) for key, x in (('rows', st.rows), ('cols', st.cols), ('k', kexpr))
             if dace.symbolic.issymbolic(x) and getattr(x, 'is_Symbol', False)}
    return (np.dtype(st.dtype.type).name, np.dtype(st.index_dtype.type).name, sizes, 'sddmm' if sddmm else 'spmm',
            names)
