"""``sdfgsparse bench --target fpga``: the FPGA designs per kernel and matrix, as the
model sees them and as the C-simulation runs them.

For each kernel (``spmv``, ``spmm:K``, ``gcn:K``: ``relu(A @ X + b)`` with the epilogue
fused, ``sddmm:K``: ``A * (X @ Y)`` on A's pattern), ``ss.optimize(target='fpga')``
chooses the streaming design with the model at the sizes of the largest matrix and builds
it once; then, per matrix:

- the model (:mod:`sdfgsparse.targets.fpga.model`) at the matrix's sizes: DSP, LUT and
  BRAM, modelled cycles and time at the clock, the bottleneck element, and the bandwidth
  the design needs against the board's;
- the C-simulation (the generated HLS code, compiled with g++) against scipy: the largest
  error relative to the result's magnitude, and the simulation's wall time (it runs each
  element on a thread: it says nothing about the FPGA's speed).

Then the multi-pumping claim, per kernel: the chosen vector width and accumulators
unpumped against pumped by 2 (and 4), DSPs of the multiply element and of the design
at equal modelled time (the whole program as built with each, as the choice models it:
for ``gcn:K`` with its epilogue). C-simulation cannot show timing closure, achieved clocks or
resources: those figures are the model's.
"""
import dataclasses
import time
from typing import Callable, List, Optional, Sequence

import numpy as np

__all__ = ['FpgaRow', 'run_fpga', 'format_fpga', 'DEFAULT_KERNELS', 'MAX_SIMULATED_NNZ']

DEFAULT_KERNELS = ('spmv', 'spmm:16', 'gcn:32', 'sddmm:16')
#: Matrices with more entries are modelled but not simulated (a simulated entry costs
#: microseconds of thread hand-offs).
MAX_SIMULATED_NNZ = 2_000_000


@dataclasses.dataclass
class FpgaRow:
    kernel: str
    matrix: str
    rows: int
    nnz: int
    design: str
    dsp: int
    lut: int
    bram18: int
    cycles: float
    model_ms: float
    bottleneck: str
    gbps_needed: float
    gbps_board: float
    error: Optional[float] = None  # C-simulation against scipy (None: not simulated)
    correct: bool = True
    sim_s: Optional[float] = None
    note: str = ''


def _program(kernel: str):
    import dace
    import sdfgsparse as ss
    M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')
    csr = ss.CSR[dace.float32, M, N, dace.int32]
    if kernel == 'spmv':

        @dace.program
        def fpga_spmv(A: csr, x: dace.float32[N]):
            return A @ x

        return fpga_spmv
    if kernel == 'spmm':

        @dace.program
        def fpga_spmm(A: csr, X: dace.float32[N, K]):
            return A @ X

        return fpga_spmm

    if kernel == 'sddmm':

        @dace.program
        def fpga_sddmm(A: csr, X: dace.float32[M, K], Y: dace.float32[K, N]):
            return ss.sddmm(A, X, Y)

        return fpga_sddmm

    @dace.program
    def fpga_gcn(A: csr, X: dace.float32[N, K], b: dace.float32[K]):
        return np.maximum(A @ X + b, 0)

    return fpga_gcn


def _inputs(kernel: str, k: int, A, rng):
    m, n = A.shape
    if kernel == 'spmv':
        return {'A': A, 'x': rng.standard_normal(n).astype(np.float32)}
    if kernel == 'sddmm':
        return {'A': A, 'X': rng.standard_normal((m, k)).astype(np.float32),
                'Y': rng.standard_normal((k, n)).astype(np.float32)}
    args = {'A': A, 'X': rng.standard_normal((n, k)).astype(np.float32)}
    if kernel == 'gcn':
        args['b'] = rng.standard_normal(k).astype(np.float32)
    return args


def _reference(kernel: str, args):
    A = args['A'].astype(np.float64)
    if kernel == 'sddmm':
        return A.multiply(args['X'].astype(np.float64) @ args['Y'].astype(np.float64)).toarray()
    if kernel == 'spmv':
        return A @ args['x'].astype(np.float64)
    Y = A @ args['X'].astype(np.float64)
    return np.maximum(Y + args['b'], 0) if kernel == 'gcn' else Y


def _parse(kernels: Sequence[str]):
    from sdfgsparse.bench.errors import OptionError
    out = []
    for spec in kernels:
        name, _, k = spec.partition(':')
        if name not in ('spmv', 'spmm', 'gcn', 'sddmm'):
            raise OptionError(f'--kernels {spec}: the FPGA bench has spmv, spmm:K, gcn:K and sddmm:K')
        try:
            k = int(k) if k else (1 if name == 'spmv' else 16)
        except ValueError:
            raise OptionError(f'--kernels {spec}: K must be a positive integer') from None
        if k < 1 or (name == 'spmv' and k != 1):
            raise OptionError(f'--kernels {spec}: K must be a positive integer (spmv has none)')
        out.append((name, k))
    return out


def run_fpga(matrices, kernels: Sequence[str] = DEFAULT_KERNELS, board: str = 'u280', clock_mhz: float = 300,
             log: Callable[[str], None] = print) -> dict:
    """Model and C-simulate every kernel on every matrix (see the module); returns
    ``{'rows': [FpgaRow], 'pumping': [lines], 'designs': {kernel: Choice report}}``."""
    import warnings

    import sdfgsparse as ss
    from sdfgsparse.bench.matrices import canonical
    from sdfgsparse.targets.fpga.csim import SimulationNotice
    from sdfgsparse.targets.fpga.model import model_design
    from sdfgsparse.targets.fpga.select import FABRIC_MHZ, _evaluate
    loaded = []
    for src in matrices:
        A = canonical(src.load(), np.float32)
        loaded.append((src.name, A))
    if not loaded:
        return {'rows': [], 'pumping': [], 'designs': {}}
    largest = max(loaded, key=lambda m: m[1].nnz)[1]
    rows, pumping, designs = [], [], {}
    rng = np.random.default_rng(0)
    for name, k in _parse(kernels):
        label = name if name == 'spmv' else f'{name}:{k}'
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', SimulationNotice)
            opt = ss.optimize(_program(name), target='fpga', matrices=_inputs(name, k, largest, rng),
                              fpga_board=board, fpga_clock_mhz=clock_mhz)
            opt.build()
        choice = opt.fpga_choice
        log(f'{label}: design chosen and built in {time.perf_counter() - t0:.1f} s'
            + (f' ({choice.rule})' if choice else ''))
        if choice:
            designs[label] = choice.report()
        model = model_design(opt.lowered, board=board, clock_mhz=clock_mhz)
        d = choice.design if choice else None
        design = f'W={d.vector_width} P={d.accumulators} F={d.pumping}' if d else 'W=1 P=1 F=1'
        for mname, A in loaded:
            args = _inputs(name, k, A, rng)
            e = _evaluate(model, {'rows': A.shape[0], 'cols': A.shape[1], 'nnz': A.nnz, 'k': k})
            row = FpgaRow(label, mname, A.shape[0], A.nnz, design, int(e['dsp']), int(e['lut']), int(e['bram18']),
                          e['cycles'], e['seconds'] * 1e3, e['bottleneck'], e['gbps_needed'], e['gbps_board'])
            if A.nnz <= MAX_SIMULATED_NNZ:
                t0 = time.perf_counter()
                got = opt(**args)
                got = got.toarray() if hasattr(got, 'toarray') else got
                row.sim_s = time.perf_counter() - t0
                want = _reference(name, args)
                scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
                row.error = float(np.abs(got - want).max()) / scale if want.size else 0.0
                row.correct = bool(row.error <= 1e-4)
            else:
                row.note = f'not simulated (over {MAX_SIMULATED_NNZ} entries)'
            rows.append(row)
            log(f'{label} {mname}: modelled {row.model_ms:.3f} ms, C-simulation '
                + (f'{row.sim_s:.1f} s, error {row.error:.1e}' if row.error is not None else 'skipped'))
        if choice and d.vector_width > 1:
            base = None  # (the choice was made at the largest matrix: its rows are at those sizes)
            for f in (1, 2, 4):
                if d.vector_width % f:
                    continue
                cand = dataclasses.replace(d, pumping=f)
                m = choice.models[cand]
                ev = m.evaluate(**choice.values(m))
                mul = m.pe('multiply')
                line = (f'{label}: W={d.vector_width} P={d.accumulators} pumped by {f}: multiply element '
                        f'{mul.dsp} DSP at {mul.clock_mhz:g} MHz, design {m.dsp} DSP, '
                        f'modelled {ev["seconds"] * 1e3:.3f} '
                        f'ms')
                if base is None:
                    base = (mul.dsp, m.dsp, ev['seconds'])
                else:
                    line += (f' ({mul.dsp / base[0] - 1:+.0%} multiply DSP, {m.dsp / base[1] - 1:+.0%} design DSP, '
                             f'time {ev["seconds"] / base[2] - 1:+.1%})')
                if f * choice.clock_mhz > FABRIC_MHZ:
                    line += f'; above {FABRIC_MHZ} MHz: not a candidate'
                pumping.append(line)
    return {'rows': rows, 'pumping': pumping, 'designs': designs}


def format_fpga(result: dict, board: str = 'u280') -> str:
    rows: List[FpgaRow] = result['rows']
    head = (f'{"kernel":<8} {"matrix":<16} {"rows":>8} {"nnz":>9} {"design":<14} {"DSP":>5} {"LUT":>7} {"BRAM":>5} '
            f'{"model ms":>9} {"bottleneck":<11} {"GB/s need/board":>16} {"C-sim":>8} {"max err":>8}')
    lines = [f'FPGA designs (model: {board}; C-simulation: the generated HLS code with g++, untimed)', head,
             '-' * len(head)]
    for r in rows:
        sim = f'{r.sim_s:.1f}s' if r.sim_s is not None else '-'
        err = f'{r.error:.1e}' if r.error is not None else r.note or '-'
        lines.append(f'{r.kernel:<8} {r.matrix[:16]:<16} {r.rows:>8} {r.nnz:>9} {r.design:<14} {r.dsp:>5} {r.lut:>7} '
                     f'{r.bram18:>5} {r.model_ms:>9.3f} {r.bottleneck[:11]:<11} '
                     f'{r.gbps_needed:>7.2f}/{r.gbps_board:<8.1f} {sim:>8} {err:>8}'
                     + ('' if r.correct else '  WRONG'))
    if result['pumping']:
        lines.append('')
        lines.append('Multi-pumping at the largest matrix (model):')
        lines += ['  ' + p for p in result['pumping']]
    return '\n'.join(lines)
