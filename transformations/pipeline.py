"""``ss.optimize``: the sparse optimisation pipeline.

Order (each step is a transformation a user can also apply by hand; see
``samples/transformations_by_hand.py``):

0. :class:`SparseFormatSelection` (only for arguments with example statistics: given in
   ``matrices`` or recorded on the SDFG) -- the storage format of a sparse argument from a
   cost model over the example's structure and the operations reading it; such arguments
   are converted on each call, unless the conversion of the matrix a call passes would
   exceed a bound on its size (:mod:`~sdfgsparse.transformations.format_guard`: then that
   call runs the program's own formats, and says so);
1. :class:`SparseFormatInference` -- CSR or CSC for the results of element-wise sparse
   operations, from their consumers and operands;
2. :class:`SparseLoopOrdering` -- sampled products ``S * (X @ Y)`` iterate over ``S``'s
   entries (``nnz * K`` instead of ``M * N * K``);
3. :class:`SparseFusion` -- ``softmax(sddmm(S, Q, K.T)) @ V`` in one pass over S's rows;
4. :class:`SparseEpilogueFusion` -- bias / activation maps into SpMV / SpMM;
5. :class:`SparseDenseTiling` -- tiles of the dense loop of SpMM, sized for the cache
   (needs the sizes: given by ``matrices`` or recorded, or constant in the program);
6. dense 2-D ``MatMul`` nodes (``X @ W``) take the register-blocked SIMD expansion of
   :mod:`sdfgsparse.targets.cpu.dense_products` instead of DaCe's default, ``Dot`` nodes
   (``np.dot`` of vectors) one SIMD reduction instead of atomic adds, and ``Reduce``
   nodes along an axis DaCe's ``'pure-seq'`` expansion (no atomics);
7. DaCe's own clean-up (``simplify``);
8. on the CPU, where another implementation family is installed (``mkl``, the ``[mkl]``
   extra) and ``matrices`` holds every argument: each product it serves is timed on it
   and on its default, the whole program, and keeps it where that is 10 % faster
   (:mod:`~sdfgsparse.transformations.implementation_choice`; ``implementations=False``
   skips it).

Fusion runs before tiling so that tiling sees the final nodes. Steps 3-5 ask the
data-movement model (:mod:`sdfgsparse.analysis.schedules`) about every match and rewrite
only where its schedule moves at least ``MARGIN`` less than the program's (with the sizes
of ``matrices=``; without them a fusion, which drops a pass over memory at every size,
applies, and tiling does not). The report says what each step applied, where, and why
(iteration counts before/after, chosen tile sizes), each model decision with the node's
lower bound, the chosen schedule's cost and the rejected ones', and how long the
heuristics took (C++ compilation excluded, but for step 8's builds and timed calls, which
its own line times).
"""
import copy
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

import dace

from sdfgsparse import errors
from sdfgsparse.analysis.iterations import iteration_count
from sdfgsparse.analysis.schedules import Machine
from sdfgsparse.analysis.user_symbols import readable, user_symbol_names
from sdfgsparse.formats import is_sparse_desc, parsing_ours
from sdfgsparse.targets.cpu.dense_products import select_dense_products
from sdfgsparse.ops.spmm import SpMM
from sdfgsparse.runtime.call import CompiledProgram
from sdfgsparse.transformations.sparse_dense_tiling import SparseDenseTiling
from sdfgsparse.transformations.sparse_epilogue_fusion import SparseEpilogueFusion
from sdfgsparse.transformations.sparse_format_inference import SparseFormatInference
from sdfgsparse.transformations.sparse_format_selection import SparseFormatSelection, format_by_name
from sdfgsparse.transformations.sparse_fusion import SparseFusion
from sdfgsparse.transformations.sparse_loop_ordering import SparseLoopOrdering
from sdfgsparse.transformations.examples import (record_examples, recorded_all_stats, recorded_machine, recorded_names,
                                                 recorded_sizes)
from sdfgsparse.transformations.format_guard import FormatGuard
from sdfgsparse.transformations.implementation_choice import (Trial, choose_implementations, families,
                                                                missing_arguments)
from sdfgsparse.runtime.host_convert import convert
from sdfgsparse.targets.fpga.model import BOARDS, model_design
from sdfgsparse.targets.cuda.expansions import IMPLEMENTATION as CUDA
from sdfgsparse.targets.cuda.lower import expand_sparse_nodes, to_gpu
from sdfgsparse.targets.fpga.select import choose_design, program_sizes
from sdfgsparse.targets.fpga.lower import converted_arguments, flat_arguments
from sdfgsparse.targets.fpga.streaming import design_of

__all__ = ['optimize', 'OptimizedProgram', 'Step', 'TARGETS']

TARGETS = ('cpu', 'gpu', 'fpga')


@dataclass
class Step:
    """One step of the pipeline: what ran, how often it applied, and why."""
    name: str
    applied: int
    detail: str
    seconds: float


@dataclass
class OptimizedProgram:
    """The optimised SDFG, callable like the original program (scipy / torch / NumPy arguments)."""
    sdfg: dace.SDFG
    steps: List[Step] = field(default_factory=list)
    heuristics_s: float = 0.0
    iterations_before: Any = None
    iterations_after: Any = None
    #: argument name -> format the selection chose; such arguments are converted on each call
    #: where the conversion stays within :data:`~sdfgsparse.transformations.format_guard.GROWTH`
    #: times the argument's own storage (else the call runs the program's own formats)
    conversions: Dict[str, str] = field(default_factory=dict)
    #: ``'cpu'``, ``'gpu'`` (then ``sdfg`` is lowered for the GPU and array arguments are
    #: device arrays; see :class:`~sdfgsparse.runtime.call.CompiledProgram`) or ``'fpga'``
    target: str = 'cpu'
    #: ``target='fpga'``: how the streaming design was chosen
    #: (:class:`sdfgsparse.targets.fpga.select.Choice`; None without an SpMM)
    fpga_choice: Any = None
    #: ``target='fpga'``: symbol values of the example matrices, and of the sizes the
    #: design was chosen at where the examples do not give them (for :meth:`fpga_report`)
    fpga_symbols: Dict[str, int] = field(default_factory=dict)
    #: ``target='fpga'``: the board and kernel clock of the model
    fpga_board: str = 'u280'
    fpga_clock_mhz: float = 300
    #: the data-movement model's decisions (:class:`sdfgsparse.analysis.schedules.Decision`),
    #: applied or not, in pipeline order
    decisions: List[Any] = field(default_factory=list)
    #: internal size symbol -> the user's name (``nnz(A)``) in :meth:`report`, before and
    #: after the pipeline (a format change renames an argument's sizes)
    symbol_names: Dict[str, str] = field(default_factory=dict)
    #: where conversions are made: what keeps each call within bounds (the program's own
    #: formats, compiled on demand, for a matrix the chosen format would blow up)
    guard: Optional[FormatGuard] = None
    #: nodes tried on another implementation family (:mod:`.implementation_choice`: the
    #: whole program timed on the examples), kept or not
    trials: List[Trial] = field(default_factory=list)
    _compiled: Optional[CompiledProgram] = None
    _lock: Any = field(default_factory=threading.Lock, repr=False)

    def _program(self) -> CompiledProgram:
        """The compiled program, made once (whichever thread asks first)."""
        if self._compiled is None:
            with self._lock:
                if self._compiled is None:
                    self._compiled = CompiledProgram(self.sdfg, self.target)
        return self._compiled

    def __call__(self, *args, **kwargs):
        program = self._program()
        if self.conversions:
            if len(args) > len(self.sdfg.arg_names):  # (the compiled program's own message)
                return program(*args, **kwargs)
            kwargs.update(zip(self.sdfg.arg_names, args))
            args = ()
            if self.guard is not None and self.guard.oversized(kwargs):  # before any conversion allocates
                return self.guard.program()(**kwargs)
            for name, fmt in self.conversions.items():
                if name in kwargs:
                    kwargs[name] = convert(kwargs[name], format_by_name(fmt))
        return program(*args, **kwargs)

    @property
    def lowered(self) -> dace.SDFG:
        """The SDFG that is generated and built, for every target: with ``target='fpga'``
        the FPGA lowering (kernel states, FPGA twins of the arguments; ``sdfg`` keeps the
        program's signature, which the call binds), with ``'gpu'`` and ``'cpu'`` ``sdfg``
        itself. It can be saved and opened in the editor."""
        return self._program().lowered

    def build(self):
        """Generate and compile the code now (otherwise on the first call), without running
        anything; returns self. A GPU program builds without a GPU (nvcc suffices)."""
        self._program().build()
        return self

    compile = build  # the older name

    def report(self) -> str:
        """What was applied and why, as text."""
        lines = [f'ss.optimize({self.sdfg.name}): heuristics {self.heuristics_s * 1e3:.1f} ms']
        for s in self.steps:
            lines.append(f'  {s.name:<22} applied {s.applied}x  {s.detail}')
        lines.append(f'  iterations: {self.iterations_before}  ->  {self.iterations_after}')
        if self.decisions:
            lines.append('  data-movement model (memory-equivalent bytes per call; analysis/schedules.py):')
            shown = [f'{d.transformation}: {d.line()}' for d in self.decisions]
            # one line per distinct decision (two alike nodes, or two steps of one fusion, give
            # the same line): counted, not repeated
            lines += [f'    {line}' + (f' ({shown.count(line)} alike)' if shown.count(line) > 1 else '')
                      for line in dict.fromkeys(shown)]
        if self.guard is not None and self.guard.events:
            lines.append('  calls that ran the program\'s own formats (the chosen one would not fit):')
            lines += [f'    {e}' for e in self.guard.events]
        return readable('\n'.join(lines), self.symbol_names)

    def fpga_report(self, **symbols) -> str:
        """``target='fpga'``: the resource and performance model of the lowered program
        (:mod:`sdfgsparse.targets.fpga.model`: DSP, LUT, FF and BRAM per processing
        element, initiation intervals, cycles, bandwidth needed against the board's) at the
        symbol values given (names of the program's symbols, or ``nnz=``, ``rows=``,
        ``k=``), else at those of the example matrices, else as expressions; and how the
        design was chosen."""
        if self.target != 'fpga':
            raise errors.UnsupportedOperationError(f'fpga_report: {self.sdfg.name} was optimised for '
                                                   f'{self.target!r}, not \'fpga\'')
        choice = self.fpga_choice
        model = model_design(self.lowered, board=self.fpga_board, clock_mhz=self.fpga_clock_mhz)
        values = dict(symbols)
        if not values and choice is not None:  # (the values its rows were evaluated at: one total)
            values = choice.values(model)
        elif not values and self.fpga_symbols:
            nnz = choice.sizes['nnz'] if choice else None  # (the kernels' entry counts and dynamic trips)
            values = {n: self.fpga_symbols.get(n, nnz if n.endswith(('_nnz', '_trips')) else None)
                      for n in model.symbols}
            if any(v is None for v in values.values()):
                values = {}  # a size nobody gave: the report stays symbolic
        text = model.table(**values)
        return text + ('\n' + choice.report() if choice else '')

    def __str__(self):
        return self.report()


#: How a report asks for example arguments, in the words of both faces (Python and the command line).
GIVE_EXAMPLES = 'give example arguments: ss.optimize(..., matrices={...}) or sdfgsparse optimize --arg NAME=FILE'

def _tile(sdfg: dace.SDFG, options: Dict[str, Any], result: 'OptimizedProgram') -> int:
    """SparseDenseTiling where the model justifies a tile (its ``can_be_applied`` asks the
    model); every SpMM's decision goes to ``result.decisions``, applied or not (none when
    its sizes are unknown)."""
    applied = 0
    for node, state in list(sdfg.all_nodes_recursive()):
        if not isinstance(node, SpMM) or node.dense_tile or not isinstance(state, dace.SDFGState):
            continue
        g = state.sdfg
        xf = SparseDenseTiling()
        for k, v in options.items():
            setattr(xf, k, v)
        xf.setup_match(sdfg, g.cfg_id, g.node_id(state), {SparseDenseTiling.product: state.node_id(node)}, 0)
        d = xf.decision(state, g)
        if d is None:
            continue
        result.decisions.append(d)
        if d.applies:
            xf.apply_pattern(append=True)
            applied += 1
    return applied


def _patterns(sdfg: dace.SDFG, matrices: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``'<argument>_vals'`` -> column indices in row order, for the example matrices given
    for sparse arguments (the gather model of the attention decision)."""
    import scipy.sparse as sp
    out = {}
    for name, value in (matrices or {}).items():
        if sp.issparse(value) and name in sdfg.arrays and is_sparse_desc(sdfg.arrays[name]):
            A = sp.csr_array(value)
            if not A.has_canonical_format:
                A = A.copy()
                A.sum_duplicates()
            out[f'{name}_vals'] = A.indices
    return out


def _select_formats(sdfg, result) -> int:
    """SparseFormatSelection for every sparse argument with recorded example statistics
    (what it reads where its own ``stats`` are empty: the same record the editor and the
    command line see)."""
    applied = 0
    for name in recorded_names(sdfg):
        desc = sdfg.arrays.get(name)
        if desc is None or not is_sparse_desc(desc):
            continue
        for state in sdfg.states():
            node = next((n for n in state.data_nodes() if n.data == name), None)
            if node is None:
                continue
            xf = SparseFormatSelection()
            xf.setup_match(sdfg, sdfg.cfg_id, sdfg.node_id(state), {SparseFormatSelection.access: state.node_id(node)}, 0)
            if xf.can_be_applied(state, 0, sdfg):
                xf.apply(state, sdfg)
                result.conversions[name] = xf.chosen
                applied += 1
            break
    return applied


def _costs(sdfg) -> str:
    hist = [t for t in sdfg.transformation_hist if isinstance(t, SparseFormatSelection)]
    return ''.join(f' (bytes per call: {t.reason})' for t in hist[-1:])


def _count(sdfg):
    try:
        return iteration_count(sdfg)
    except Exception as e:  # the count is a report item; never fail the optimisation for it
        return f'(not counted: {e})'


def _steered(sdfg, xform_cls, decide, result, options=None) -> int:
    """Apply ``xform_cls`` at each match the model justifies: ``decide(xf, state, sdfg)``
    returns a :class:`~sdfgsparse.analysis.schedules.Decision` (recorded in
    ``result.decisions``) or None when the sizes are unknown, which applies the rewrite
    (a fusion moves less at every size). Matches the model rejects stay; returns the
    number applied."""
    from dace.transformation.passes.pattern_matching import match_patterns
    applied, rejected = 0, set()
    while True:
        for xf in match_patterns(sdfg, xform_cls, options=[options] if options else None):
            tcfg = sdfg.cfg_list[xf.cfg_id]
            tsdfg = tcfg.sdfg if not isinstance(tcfg, dace.SDFG) else tcfg
            state = tcfg.node(xf.state_id)
            key = (xf.cfg_id, xf.state_id, tuple(sorted(xf._subgraph.items())))
            if key in rejected:
                continue
            d = decide(xf, state, tsdfg)
            if d is not None:
                result.decisions.append(d)
            if d is not None and not d.applies:
                rejected.add(key)
                continue
            xf.apply_pattern(append=True)
            applied += 1
            break
        else:
            return applied


def _run(sdfg, xform, options=None, repeated=True):
    if repeated:
        return sdfg.apply_transformations_repeated(xform, options=options, validate=False)
    return sdfg.apply_transformations(xform, options=options, validate=False)


def optimize(program_or_sdfg, target: str = 'cpu', matrices: Optional[Mapping[str, Any]] = None,
             cache_size: Optional[int] = None, fpga_board: str = 'u280', fpga_clock_mhz: float = 300,
             formats: bool = True, implementations: Optional[bool] = None) -> OptimizedProgram:
    """Apply the sparse pipeline (see the module docstring).

    :param program_or_sdfg: a ``@dace.program`` (its SDFG is built and copied) or an SDFG
                            (transformed in place).
    :param target: ``'cpu'``, ``'gpu'``: after the pipeline the SDFG is lowered for
                   CUDA (:func:`sdfgsparse.targets.cuda.lower.to_gpu`: sparse nodes take
                   their ``'pure'`` expansion, array arguments live in device memory), and
                   step 6 is skipped (its expansions are CPU SIMD tasklets); or ``'fpga'``:
                   step 6 is skipped and a copy of the SDFG is lowered for the FPGA
                   (:func:`sdfgsparse.targets.fpga.to_fpga`; ``.sdfg`` keeps the program's
                   signature), run as a C-simulation of the generated HLS code.
    :param matrices: example arguments by name (scipy / torch sparse, NumPy arrays); their
                     sizes and structure statistics are recorded on the SDFG
                     (:func:`~sdfgsparse.transformations.examples.record_examples`; the
                     matrices themselves are not kept). Without them, those recorded on
                     an SDFG (``ss.record_examples``, ``sdfgsparse annotate``, an earlier
                     ``ss.optimize``) steer format selection, tiling and the model.
    :param cache_size: last-level cache size in bytes for the data-movement model (default:
                       this machine's).
    :param fpga_board: ``'fpga'``: the board of the model that chooses the streaming design
                       (:data:`sdfgsparse.targets.fpga.model.BOARDS`).
    :param fpga_clock_mhz: ``'fpga'``: the kernel clock of that model.
    :param formats: False skips step 0 (the program keeps its own formats).
    :param implementations: on the CPU, where another implementation family is installed
                            (``mkl``: the ``[mkl]`` extra), try each node it serves on it and
                            keep it where the whole program, timed on ``matrices`` (every
                            argument), gets faster (:mod:`.implementation_choice`; a few builds
                            and timed calls). None: yes unless the environment variable
                            ``SDFGSPARSE_MEASURE_IMPLEMENTATIONS`` is ``0``; False: never.
    :return: an :class:`OptimizedProgram` (``.sdfg``, ``.report()``, callable; for the
             FPGA also ``.fpga_report()``).
    """
    if target not in TARGETS:
        raise errors.UnsupportedOperationError(f'ss.optimize: target {target!r} is not supported (supported: '
                                               f'{", ".join(TARGETS)})')
    if cache_size is not None and (not isinstance(cache_size, int) or cache_size <= 0):
        raise errors.ShapeError(f'ss.optimize: cache_size must be a positive number of bytes, got {cache_size!r}')
    if target == 'fpga':  # (before the pipeline changes an SDFG the caller passed)
        if fpga_board not in BOARDS:
            raise errors.ArgumentError(f'ss.optimize: fpga_board {fpga_board!r} is not known (known: '
                                       f'{", ".join(sorted(BOARDS))})')
        if isinstance(fpga_clock_mhz, bool) or not isinstance(fpga_clock_mhz, (int, float)) or not fpga_clock_mhz > 0:
            raise errors.ArgumentError(f'ss.optimize: fpga_clock_mhz must be a positive number of MHz, got '
                                       f'{fpga_clock_mhz!r}')
    if isinstance(program_or_sdfg, dace.SDFG):
        sdfg = program_or_sdfg
    elif hasattr(program_or_sdfg, 'to_sdfg'):
        with parsing_ours():
            sdfg = copy.deepcopy(program_or_sdfg.to_sdfg())
    else:
        raise errors.UnsupportedOperationError(f'ss.optimize: expected a @dace.program or an SDFG, got '
                                               f'{type(program_or_sdfg).__name__}')
    t_start = time.perf_counter()
    if matrices:  # kept on the SDFG: a saved copy lists and applies the steered transformations
        record_examples(sdfg, matrices, cache_bytes=cache_size)
    sizes = recorded_sizes(sdfg)  # (given now, or recorded earlier)
    examples = bool(sizes or recorded_names(sdfg))
    result = OptimizedProgram(sdfg, target=target)
    own = copy.deepcopy(sdfg) if formats and recorded_names(sdfg) else None  # (the fallback's start)
    result.iterations_before = _count(sdfg)
    result.symbol_names = user_symbol_names(sdfg)

    def step(name, fn, detail_fn):
        t0 = time.perf_counter()
        n = fn()
        result.steps.append(Step(name, n, detail_fn(n), time.perf_counter() - t0))

    before = result.iterations_before
    step('SparseFormatSelection', lambda: _select_formats(sdfg, result) if formats else 0,
         lambda n: '; '.join(f'{k} -> {v}' for k, v in result.conversions.items()) + _costs(sdfg) if n else
         ('skipped (formats=False)' if not formats else 'the given formats are the cheapest'
          if recorded_names(sdfg) else 'no example matrices given or recorded'))
    if result.conversions:
        result.guard = FormatGuard(own, result.conversions, dict(target=target, cache_size=cache_size,
                                                                 fpga_board=fpga_board, fpga_clock_mhz=fpga_clock_mhz),
                                   optimize)
    step('SparseFormatInference', lambda: _run(sdfg, SparseFormatInference),
         lambda n: 'element-wise sparse results stored as CSC (column-major uses)' if n else
         'every sparse result stays CSR')
    step('SparseLoopOrdering', lambda: _run(sdfg, SparseLoopOrdering),
         lambda n: f'sampled products -> SDDMM; iterations {before} -> {_count(sdfg)}' if n else
         'no sampled product S * (X @ Y)')
    rec = recorded_machine(sdfg)  # (what the examples were recorded with, where not given here)
    machine = Machine.here(llc=cache_size or rec.get('cache_bytes'), threads=rec.get('threads'))
    patterns = _patterns(sdfg, matrices)

    def attention(xf, state, g):
        return xf.decision(state, g, sizes, patterns.get(xf.sparse_argument(state)), machine)

    def rejected(name):
        return [d for d in result.decisions if d.transformation == name and not d.applies]

    step('SparseFusion', lambda: _steered(sdfg, SparseFusion, attention, result),
         lambda n: 'softmax(sddmm(S, Q, K.T)) @ V -> one pass over S' if n else
         ('the model keeps the three nodes' if rejected('SparseFusion') else 'no attention chain'))
    step('SparseEpilogueFusion',
         lambda: _steered(sdfg, SparseEpilogueFusion, lambda xf, st, g: xf.decision(st, g, sizes, machine), result),
         lambda n: 'element-wise maps fused into SpMV/SpMM' if n else
         ('the model keeps the separate passes' if rejected('SparseEpilogueFusion') else
          'no element-wise map after SpMV/SpMM'))
    tiling = {'sizes': sizes}
    if cache_size:
        tiling['cache_bytes'] = cache_size

    def tiles(n):
        if not n:
            if rejected('SparseDenseTiling'):
                return 'the model keeps the untransformed dense loops'
            return 'no SpMM to tile' + ('' if examples else f' (sizes unknown: {GIVE_EXAMPLES})')
        t = [f'{node.label}: {node.dense_tile} columns' for node, _ in sdfg.all_nodes_recursive()
             if isinstance(node, SpMM) and node.dense_tile]
        return 'dense tiles ' + ', '.join(t)

    step('SparseDenseTiling', lambda: _tile(sdfg, tiling, result), tiles)
    if target == 'cpu':
        step('dense nodes', lambda: select_dense_products(sdfg),
             lambda n: f'{n} dense nodes (X @ W register-blocked, dot products as one SIMD reduction, axis '
             'reductions without atomics; targets/cpu/dense_products.py)' if n else 'no dense 2-D product, dot product '
             'or axis reduction')
    step('simplify', lambda: len(sdfg.simplify() or {}), lambda n: 'DaCe simplification passes')
    if implementations is None:
        implementations = os.environ.get('SDFGSPARSE_MEASURE_IMPLEMENTATIONS', '1') != '0'
    fams = families() if target == 'cpu' and implementations else {}
    if fams:  # another implementation family is installed (the [mkl] extra): one measured choice per node
        why_not = []

        def implementations():
            if result.conversions:
                why_not.append('not measured: the chosen formats convert arguments on each call')
                return 0
            missing = missing_arguments(sdfg, matrices)
            if missing:
                why_not.append(f'not measured: no example for {", ".join(missing)} ({GIVE_EXAMPLES}, for '
                               'every argument)')
                return 0
            result.trials = choose_implementations(sdfg, matrices, CompiledProgram)
            return sum(t.chosen for t in result.trials)

        def tried(n):
            if why_not:
                return why_not[0]
            if not result.trials:
                return f'no node that {", ".join(fams)} serves'
            return '; '.join(t.line() for t in result.trials) + ' (whole program, median of the examples)'

        step('implementations', implementations, tried)
    if target == 'gpu':

        def lower():
            n = expand_sparse_nodes(sdfg, implementation=CUDA)
            to_gpu(sdfg)
            return n

        step('GPU lowering', lower, lambda n: f"{n} sparse nodes expanded ({CUDA!r}), array arguments in device "
             'memory, maps -> CUDA kernels')
    if target == 'fpga':  # lowered on a copy: the program keeps its signature (sparse arguments)

        def choose():
            known = recorded_sizes(sdfg)  # (the examples given now or recorded earlier: one path)
            vt, it, sizes, op, names = program_sizes(sdfg, known, recorded_all_stats(sdfg, keys=('nnz', )))
            result.fpga_symbols = known
            result.fpga_board, result.fpga_clock_mhz = fpga_board, fpga_clock_mhz
            if vt is not None:  # each candidate modelled as this SDFG lowered with it (what lower_fpga builds)
                result.fpga_choice = c = choose_design(vt, it, sizes, board=fpga_board, clock_mhz=fpga_clock_mhz, op=op,
                                                       program=sdfg, symbols=known, names=names)
                result.fpga_symbols = {**c.symbols, **known}  # the sizes it was chosen at
            return int(result.fpga_choice is not None)

        def chosen(n):
            c = result.fpga_choice
            if c is None:
                return 'no SpMM or SDDMM: the default design (SpMV streams one lane)'
            d = c.design
            given = 'the example matrices' if examples else f'default sizes ({GIVE_EXAMPLES})'
            return (f'W={d.vector_width}, P={d.accumulators}, pumping {d.pumping} at {given} on {c.board}: {c.rule}; '
                    f'{len(c.rows)} candidates in fpga_report()')

        step('FPGA design', choose, chosen)

        def lower_fpga():  # the count: FPGA kernel states
            design = result.fpga_choice.design if result.fpga_choice else None
            result._compiled = CompiledProgram(sdfg, 'fpga', design=design)
            low = result._compiled.lowered
            return sum(dace.sdfg.utils.is_fpga_kernel(low, st) for st in low.states())

        def fpga_detail(kernels):
            low = result._compiled.lowered
            flat = ', '.join(f'{a} -> {", ".join(m.values())}' for a, m in flat_arguments(low).items())
            streams = [design_of(st) for st in low.states() if design_of(st)]
            streamed = ', '.join(f"{d['op']}{' + epilogue' if d['epilogue'] else ''} (W={d['design'].vector_width}, "
                                 f"P={d['design'].accumulators}, pumping {d['design'].pumping})" for d in streams)
            conv = ', '.join(f'{a} (converted to CSR on the host)' for a in converted_arguments(low))
            return (f"streaming designs: {streamed or 'none'}{'; ' + conv if conv else ''}; other sparse nodes "
                    f"expanded ('pure'); sparse arguments flattened ({flat or 'none'}); {kernels} FPGA kernel "
                    'state(s) with global-memory twins; runs as a C-simulation without an FPGA')

        step('FPGA lowering', lower_fpga, fpga_detail)
    sdfg.validate()
    result.iterations_after = _count(sdfg)
    result.symbol_names = {**result.symbol_names, **user_symbol_names(sdfg)}
    result.heuristics_s = time.perf_counter() - t_start
    return result
