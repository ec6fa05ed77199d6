"""The streaming design an FPGA program gets: vector width ``W``, accumulators ``P`` and
multi-pumping factor ``F``, chosen with the resource and performance model
(:mod:`.model`) of the design as it is built.

Each candidate is modelled on what will be built with it: the program itself, lowered
with that design (:func:`.lower.to_fpga`, as :class:`~sdfgsparse.runtime.call.CompiledProgram`
lowers it: every streamed product, its fused epilogue in the ``write`` element, the
kernels of the other operations, every ``m_axi`` port). Without a program (the benchmark's
pumping figures, the tests of the rule) it is a probe holding the streaming SpMM (or
SDDMM) of the value and index types alone. The models are symbolic, so they are cached per
process by the program's content (:func:`sdfgsparse.build.naming.content_hash`: the
recorded examples do not count), design, board and clock, then evaluated at the sizes of
the program's widest SpMM or SDDMM (the examples', else :data:`DEFAULT_SIZES`). The
choice:

1. the shortest modelled time on the board, among candidates that fit its DSPs, LUTs,
   flip-flops, BRAM and URAM, with a pumped clock (``F`` times the kernel clock) at most
   :data:`FABRIC_MHZ`;
2. within 2 % of that time, the fewest DSPs (this is where pumping wins: the multiply
   element's DSPs fall by ``F`` at equal throughput), then the fewest LUTs.

The report lists every candidate with its modelled time, bottleneck element and resources
(the whole program's: the chosen row is the total of ``fpga_report()``), and says which
rule decided.
"""
import copy
import dataclasses
import functools
import math
import threading
from typing import Dict, List, Optional, Tuple

import dace
import sympy

from sdfgsparse import errors
from sdfgsparse.build.naming import content_hash
from sdfgsparse.formats import CSR
from sdfgsparse.ops.functions import sddmm
from sdfgsparse.ops.sddmm import SDDMM
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.targets.fpga.lower import to_fpga
from sdfgsparse.targets.fpga.model import DesignModel, model_design
from sdfgsparse.targets.fpga.streaming import Design

__all__ = ['choose_design', 'Choice', 'DEFAULT_SIZES', 'FABRIC_MHZ', 'candidates', 'program_sizes', 'design_model',
           'model_values']

#: Sizes of the modelled SpMM when the caller gives no example matrices.
DEFAULT_SIZES = {'rows': 100000, 'cols': 100000, 'nnz': 1000000, 'k': 16}
#: Highest clock taken for a pumped element (an UltraScale+ fabric rarely closes above it).
FABRIC_MHZ = 650
_TIE = 0.02
_LOCK = threading.Lock()
#: Resources a candidate must fit (the keys of ``DesignModel.evaluate()['utilisation']``).
RESOURCES = ('dsp', 'lut', 'ff', 'bram18', 'uram')
_MODELS: Dict[tuple, DesignModel] = {}  # (program content, design, board, clock) -> model
_MODELS_MAX = 512
_LOWERED: Dict[tuple, dace.SDFG] = {}  # (program content, design) -> the lowered SDFG (another board or clock)
_LOWERED_MAX = 32


@dataclasses.dataclass
class Choice:
    """The chosen design and how: ``rows`` has one dict per candidate (``design``,
    ``seconds``, ``cycles``, ``bottleneck``, the resources of :data:`RESOURCES`, ``fits``,
    ``why_not``), each the model of the whole program as built with that design
    (``models``: design -> :class:`~.model.DesignModel`), evaluated at ``symbols``."""
    design: Design
    sizes: Dict[str, int]
    board: str
    clock_mhz: float
    rule: str
    rows: List[dict]
    op: str = 'spmm'
    #: the program the candidates were modelled on (its name; None: the probe of ``op`` alone)
    program: Optional[str] = None
    #: symbol values of the models the rows were evaluated at
    symbols: Dict[str, int] = dataclasses.field(default_factory=dict)
    #: program symbols no example or size gave, and the value assumed for them
    assumed: Dict[str, int] = dataclasses.field(default_factory=dict)
    models: Dict[Design, DesignModel] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def row(self) -> dict:
        """The chosen candidate's row."""
        return next(r for r in self.rows if r['design'] == self.design)

    def values(self, model: DesignModel) -> Dict[str, int]:
        """The values of ``model``'s symbols the rows were evaluated at (for the model of
        the lowered program, so that its report reads the chosen row's figures)."""
        return model_values(model, self.sizes, self.symbols)

    def report(self) -> str:
        op = {'spmm': 'SpMM', 'sddmm': 'SDDMM'}[self.op]
        where = f' in {self.program} (the whole program modelled per candidate)' if self.program else ''
        assumed = (' (assumed ' + ', '.join(f'{k}={v}' for k, v in sorted(self.assumed.items())) + ')'
                   if self.assumed else '')
        lines = [f'FPGA design for an {op} of {self.sizes["rows"]} x {self.sizes["cols"]}, '
                 f'{self.sizes["nnz"]} entries, K = {self.sizes["k"]}{where} on {self.board} at '
                 f'{self.clock_mhz:g} MHz{assumed}:',
                 f'  {"W":>3} {"P":>3} {"F":>2} {"modelled":>11} {"DSP":>5} {"LUT":>8} {"FF":>8} {"BRAM18":>6}  '
                 'bottleneck / why not']
        for r in sorted(self.rows, key=lambda r: (r['why_not'] != '', r['seconds'])):
            d = r['design']
            mark = '*' if d == self.design else ' '
            lines.append(f'{mark} {d.vector_width:>3} {d.accumulators:>3} {d.pumping:>2} {r["seconds"] * 1e3:>9.3f}ms '
                         f'{r["dsp"]:>5} {r["lut"]:>8} {r["ff"]:>8} {r["bram18"]:>6}  '
                         f'{r["why_not"] or r["bottleneck"]}')
        c = self.row
        lines.append(f'  chosen W={self.design.vector_width}, P={self.design.accumulators}, '
                     f'pumping {self.design.pumping} (DSP {c["dsp"]}, LUT {c["lut"]}, FF {c["ff"]}, BRAM18 '
                     f'{c["bram18"]}): {self.rule}')
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
    V, I = getattr(dace, vt), getattr(dace, it)
    M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
    csr = CSR[V, M, N, I]

    @dace.program
    def fpga_design_probe(A: csr, B: V[N, K]):
        return A @ B

    @dace.program
    def fpga_design_probe_sddmm(A: csr, X: V[M, K], Y: V[K, N]):
        return sddmm(A, X, Y)

    return (fpga_design_probe_sddmm if op == 'sddmm' else fpga_design_probe).to_sdfg()


def design_model(program: dace.SDFG, design: Design, board: str = 'u280', clock_mhz: float = 300,
                 key: Optional[str] = None) -> DesignModel:
    """The model of ``program`` lowered with ``design`` (a copy: ``program`` is not
    changed), as :func:`.lower.to_fpga` builds it; cached per process by the program's
    content (or ``key``), the design, board and clock."""
    content = key or content_hash(program)
    key = (content, design, board, float(clock_mhz))
    with _LOCK:  # (one lowering at a time; two threads asking for one candidate model it once)
        model = _MODELS.get(key)
        if model is None:
            lowered = _LOWERED.get((content, design))
            if lowered is None:
                lowered = _remember(_LOWERED, (content, design), to_fpga(copy.deepcopy(program), design), _LOWERED_MAX)
            model = _remember(_MODELS, key, model_design(lowered, board=board, clock_mhz=clock_mhz), _MODELS_MAX)
        return model


def _remember(cache: dict, key, value, limit: int):
    if len(cache) >= limit:
        cache.pop(next(iter(cache)))  # (the oldest)
    cache[key] = value
    return value


def _model(vt: str, it: str, design: Design, board: str, clock_mhz: float, op: str = 'spmm') -> DesignModel:
    """The model of the probe of ``op`` alone (:func:`_probe`) with ``design``."""
    return design_model(_probe(vt, it, op), design, board, clock_mhz, key=f'probe:{vt}:{it}:{op}')


def _is_count(name: str) -> bool:
    """A symbol the lowering makes that counts stored entries (the streaming kernels'
    ``<kernel>_nnz``) or the trips of a loop it could not sum (``<map>_trips``)."""
    return name.endswith(('_nnz', '_trips'))


def model_values(model: DesignModel, sizes: Dict[str, int], symbols: Dict[str, int]) -> Dict[str, int]:
    """Values of ``model``'s symbols: ``symbols`` (program symbol -> value) where they give
    one, else the entries ``sizes['nnz']`` for the counts the lowering makes, else
    ``sizes['k']`` (a program symbol no example gives: :attr:`Choice.assumed` lists it)."""
    return {s: symbols[s] if s in symbols else sizes['nnz'] if _is_count(s) else sizes['k'] for s in model.symbols}


def _evaluate(model, sizes: Dict[str, int]) -> dict:
    """The model of a program whose sizes are the symbols M, N and K (the probes and the
    bench programs; any other symbol counts entries) at ``sizes``."""
    symbols = {'M': sizes['rows'], 'N': sizes['cols'], 'K': sizes['k']}
    values = {s: symbols.get(s, sizes['nnz']) for s in model.symbols}
    return model.evaluate(**values)


def choose_design(vt: str = 'float32', it: str = 'int32', sizes: Optional[Dict[str, int]] = None,
                  board: str = 'u280', clock_mhz: float = 300, op: str = 'spmm', program: Optional[dace.SDFG] = None,
                  symbols: Optional[Dict[str, int]] = None, names: Optional[Dict[str, str]] = None) -> Choice:
    """The design of ``program`` (an SDFG as it will be lowered, unchanged here; None: the
    probe holding an SpMM, ``op='sddmm'`` an SDDMM, of values ``vt`` and indices ``it``)
    whose widest SpMM or SDDMM has ``sizes`` (``rows``, ``cols``, ``nnz``, ``k``;
    :data:`DEFAULT_SIZES` for those missing) on ``board``; see the module for the rule.

    :param symbols: values of the program's symbols (the recorded examples'); those of
                    ``rows``, ``cols`` and ``k`` come from ``sizes`` through ``names``
                    (size -> the program's symbol of it) where not given.
    :param names: see ``symbols`` (the last item of :func:`program_sizes`).
    """
    if op not in ('spmm', 'sddmm'):
        raise errors.ArgumentError(f'choose_design: op must be spmm or sddmm, got {op!r}')
    sizes = {**DEFAULT_SIZES, **{k: int(v) for k, v in (sizes or {}).items() if v is not None}}
    if program is None:
        names, key, label = {'rows': 'M', 'cols': 'N', 'k': 'K'}, f'probe:{vt}:{it}:{op}', None
        program = _probe(vt, it, op)
    else:
        key, label = content_hash(program), program.name
    given = {str(k): int(v) for k, v in (symbols or {}).items()}
    values = {**{n: sizes[k] for k, n in (names or {}).items()}, **given}
    own = {str(s) for s in program.free_symbols} | set(map(str, program.symbols))
    rows, models, used, assumed = [], {}, {}, {}
    for design in candidates(sizes['k']):
        m = models[design] = design_model(program, design, board, float(clock_mhz), key=key)
        v = model_values(m, sizes, values)
        used.update(v)
        assumed.update({s: x for s, x in v.items() if s in own and s not in values})
        e = m.evaluate(**v)
        why = ''
        over = [f'{r} {e["utilisation"][r]:.0%}' for r in RESOURCES if e['utilisation'][r] > 1]
        if over:
            why = 'does not fit: ' + ', '.join(over)
        elif design.pumping * clock_mhz > FABRIC_MHZ:
            why = f'pumped clock {design.pumping * clock_mhz:g} MHz above {FABRIC_MHZ} MHz'
        rows.append(dict(design=design, seconds=e['seconds'], cycles=e['cycles'], bottleneck=e['bottleneck'],
                         **{r: int(e[r]) for r in RESOURCES}, why_not=why))
    extra = dict(program=label, symbols=used, assumed=assumed, models=models)
    fit = [r for r in rows if not r['why_not']]
    if not fit:
        best = min(rows, key=lambda r: (r['dsp'], r['lut'], r['seconds']))
        return Choice(best['design'], sizes, board, clock_mhz, 'no candidate fits the board: the fewest DSPs',
                      rows, op, **extra)
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
    return Choice(best['design'], sizes, board, clock_mhz, rule, rows, op, **extra)


def program_sizes(sdfg: dace.SDFG, symbols: Optional[Dict[str, int]] = None,
                  stats: Optional[Dict[str, Dict[str, float]]] = None) -> Tuple[Optional[str], Optional[str],
                                                                                Dict[str, int], str, Dict[str, str]]:
    """(value type, index type, sizes, ``'spmm'`` or ``'sddmm'``, size -> symbol) of the
    SpMM or SDDMM of ``sdfg`` with the widest dense operand, read from example values:
    ``symbols`` (program symbol -> value) and ``stats`` (sparse argument -> its structure
    statistics, ``nnz`` at least), as :mod:`sdfgsparse.transformations.examples` records
    them. Its sizes come from its own operands where the examples give them (``k`` from
    its dense operand's shape, ``rows``/``cols`` from its sparse one's, ``nnz`` from that
    argument's statistics); a size is missing where they do not. The last item names the
    symbols of ``rows``, ``cols`` and ``k`` where they are symbols. (None, None, {}, '', {})
    without either operation."""
    import numpy as np
    symbols = {str(k): int(v) for k, v in (symbols or {}).items()}
    stats = stats or {}

    def value(expr) -> Optional[int]:
        x = sympy.sympify(expr)
        x = x.subs({s: symbols[s.name] for s in x.free_symbols if s.name in symbols})
        return int(x) if x.is_number else None  # (None: a symbol no example gives)

    found = []
    for node, state in sdfg.all_nodes_recursive():
        if isinstance(node, (SpMM, SDDMM)):
            conn, prefix = ('_B', 'A') if isinstance(node, SpMM) else ('_X', 'S')
            kexpr = node.connected(state, conn).shape[-1]
            a = next(e for e in state.in_edges(node) if e.dst_conn.startswith(f'_{prefix}_')).src
            a = next((e.src.data for e in state.in_edges(a) if isinstance(e.src, dace.nodes.AccessNode)), a.data)
            found.append((value(kexpr) or 0, isinstance(node, SDDMM), node.operand_type(state, prefix), kexpr, a))
    if not found:
        return None, None, {}, '', {}
    k, sddmm, st, kexpr, a = max(found, key=lambda f: f[:2])
    sizes = {'k': k} if k else {}
    for key, expr in (('rows', st.rows), ('cols', st.cols)):
        if value(expr) is not None:
            sizes[key] = value(expr)
    nnz = (stats.get(a) or {}).get('nnz')
    if isinstance(nnz, (int, float)) and nnz >= 0:
        sizes['nnz'] = int(nnz)
    names = {key: str(x) for key, x in (('rows', st.rows), ('cols', st.cols), ('k', kexpr))
             if dace.symbolic.issymbolic(x) and getattr(x, 'is_Symbol', False)}
    return (np.dtype(st.dtype.type).name, np.dtype(st.index_dtype.type).name, sizes, 'sddmm' if sddmm else 'spmm',
            names)
