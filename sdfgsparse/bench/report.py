"""The readable report of a run: machine line, compile target line (CPU, compiler, the
``-march`` of the generated code and what ``native`` resolves to here, vector bytes,
threads), compile times, one table per kernel (matrices × systems), geometric means,
skipped work and a noise warning.

Per-kernel table: median milliseconds per system; ``WRONG`` (result disagreed with scipy,
not timed), ``FAIL`` (raised), ``-`` (the peer has no such kernel). ``fastest peer`` is
the fastest correct peer on that matrix; ``speedup`` = its time / sdfgsparse's time (above
1: sdfgsparse is faster). Then sdfgsparse's GFLOP/s, its effective GB/s and that as a
percentage of the STREAM triad, and the same GB/s (%) for the fastest peer. The
``geomean`` row gives, per system, the geometric mean over matrices of its time relative to
the fastest peer (``x1.00``: the fastest peer everywhere), and the geometric mean speedup.

With ``--optimize`` (results of ``sdfgsparse-opt`` present) the table has both systems
and, instead of ``speedup``: ``opt speedup`` (fastest peer time / sdfgsparse-opt time),
``speedup`` (fastest peer time / sdfgsparse time) and ``opt gain`` (sdfgsparse time /
sdfgsparse-opt time: above 1, the optimised program is faster); GF/s and GB/s are then
sdfgsparse-opt's. A section before the tables gives ``ss.optimize`` per kernel: the
heuristics time (median over matrices, C++ compilation excluded), the build time and the
transformations applied.
"""
import os
import math
from typing import Dict, Iterable, List, Optional

from sdfgsparse.bench.results import ALL_SYSTEMS, OURS, BenchResult, Result
from sdfgsparse.bench.timing import NOISE_SPREAD

__all__ = ['format_report', 'noise_warning', 'fastest_peer', 'geomean']


def geomean(values: Iterable[float]) -> Optional[float]:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _ms(t: Optional[float]) -> str:
    if t is None:
        return ''
    ms = t * 1e3
    if ms >= 100:
        return f'{ms:.0f}'
    if ms >= 10:
        return f'{ms:.1f}'
    if ms >= 1:
        return f'{ms:.2f}'
    return f'{ms:.3f}'


def _count(n: int) -> str:
    if n >= 1e6:
        return f'{n / 1e6:.1f}M'
    if n >= 1e3:
        return f'{n / 1e3:.1f}k'
    return str(n)


def _cell(r: Optional[Result]) -> str:
    if r is None:
        return '-'
    if r.error and r.error.startswith('failed'):
        return 'FAIL'
    if not r.correct:
        return 'WRONG'
    return _ms(r.median_s)


def fastest_peer(rows: Dict[str, Result]) -> Optional[Result]:
    """The correct, timed peer (not sdfgsparse or sdfgsparse-opt) with the smallest median, or None."""
    peers = [r for s, r in rows.items() if s not in OURS and r.timed]
    return min(peers, key=lambda r: r.median_s) if peers else None


def _bw(r: Optional[Result]) -> str:
    if r is None or not r.timed or r.gbps is None:
        return ''
    pct = f' ({100 * r.bw_fraction:.0f}%)' if r.bw_fraction is not None else ''
    return f'{r.gbps:.2f}{pct}'


def _ratio(num: Optional[Result], den: Optional[Result]) -> Optional[float]:
    """``num``'s median / ``den``'s median, when both are timed."""
    if num and den and num.timed and den.timed and den.median_s > 0:
        return num.median_s / den.median_s
    return None


def _kernel_table(kernel: str, results: List[Result]) -> List[str]:
    matrices: List[str] = []
    by: Dict[str, Dict[str, Result]] = {}
    for r in results:
        if r.matrix not in by:
            matrices.append(r.matrix)
            by[r.matrix] = {}
        by[r.matrix][r.system] = r
    systems = [s for s in ALL_SYSTEMS if any(s in by[m] for m in matrices)]
    opt = OURS[0] in systems
    speed_cols = ['opt speedup', 'speedup', 'opt gain'] if opt else ['speedup']
    who = 'opt' if opt else 'sdfg'
    head = ['matrix', 'nnz'] + systems + ['fastest peer'] + speed_cols + [f'{who} GF/s', f'{who} GB/s', 'peer GB/s']
    rows: List[List[str]] = []
    rel: Dict[str, List[float]] = {s: [] for s in systems}
    ratios: List[List[float]] = [[] for _ in speed_cols]
    for m in matrices:
        row = by[m]
        any_r = next(iter(row.values()))
        best = fastest_peer(row)
        mine, shown = row.get('sdfgsparse'), row.get(OURS[0] if opt else 'sdfgsparse')
        values = [_ratio(best, mine)]
        if opt:
            values = [_ratio(best, shown)] + values + [_ratio(mine, shown)]
        for acc, v in zip(ratios, values):
            if v:
                acc.append(v)
        for s in systems:
            if best and s in row and row[s].timed and best.median_s > 0:
                rel[s].append(row[s].median_s / best.median_s)
        rows.append([m, _count(any_r.nnz)] + [_cell(row.get(s)) for s in systems] + [best.system if best else ''] +
                    [f'{v:.3g}' if v else '' for v in values] + [
                        f'{shown.gflops:.3g}' if shown and shown.timed and shown.gflops is not None else '',
                        _bw(shown), _bw(best)
                    ])
    if len(matrices) > 1:
        gs = [geomean(acc) for acc in ratios]
        rows.append(['geomean', ''] + [f'x{geomean(rel[s]):.2f}' if geomean(rel[s]) else '' for s in systems] + [''] +
                    [f'{g:.3g}' if g else '' for g in gs] + ['', '', ''])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = lambda cells: '  '.join(c.ljust(w) if i == 0 or i == len(systems) + 2 else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    if opt:
        title = (f'{kernel}  (median ms; speedup = fastest peer time / system time; '
                 f'opt gain = sdfgsparse time / sdfgsparse-opt time)')
    else:
        title = f'{kernel}  (median ms; speedup = fastest peer time / sdfgsparse time)'
    lines = [title, fmt(head), '  '.join('-' * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return lines


def _optimize_lines(records: List[dict], order: List[str]) -> List[str]:
    """Per kernel (in the order of ``order``, the run's kernel labels): ss.optimize's
    heuristics time (median, range over matrices), build time, and what was applied."""
    kernels: List[str] = [k for k in order if any(r['kernel'] == k for r in records)]
    for rec in records:
        if rec['kernel'] not in kernels:
            kernels.append(rec['kernel'])
    out = ['ss.optimize per kernel (heuristics: median over matrices, C++ build excluded):',
           '  kernel        heuristics ms (min-max)  build s (first, max)  applied']
    for k in kernels:
        recs = [r for r in records if r['kernel'] == k]
        errs = [r for r in recs if r.get('error')]
        ok = [r for r in recs if r.get('heuristics_ms') is not None]
        if not ok:
            out.append(f'  {k:<13} failed: {errs[0]["error"] if errs else "no record"}')
            continue
        hs = sorted(r['heuristics_ms'] for r in ok)
        med = hs[len(hs) // 2] if len(hs) % 2 else (hs[len(hs) // 2 - 1] + hs[len(hs) // 2]) / 2
        builds = [r['build_s'] for r in ok if r.get('build_s') is not None]
        build = f'{builds[0]:.2f}, {max(builds):.2f}' if builds else ''
        applied = {}
        for r in ok:
            for name, n in r.get('steps', {}).items():
                if n and name != 'simplify':
                    applied[name] = max(applied.get(name, 0), n)
        what = ', '.join(f'{name} {n}x' for name, n in applied.items()) or 'nothing'
        line = f'  {k:<13} {med:8.1f} ({hs[0]:.1f}-{hs[-1]:.1f})'.ljust(41) + f'  {build:<20}  {what}'
        if errs:
            line += f'; failed on {len(errs)} matrices: {errs[0]["error"]}'
        out.append(line)
    return out


def noise_warning(result: BenchResult, threshold: float = NOISE_SPREAD) -> Optional[str]:
    """A one-line warning when some timings' min–max spread exceeds ``threshold`` × median."""
    timed = [r for r in result.results if r.timed and r.runs > 1]
    noisy = [r for r in timed if r.spread > threshold]
    if not noisy:
        return None
    worst = max(noisy, key=lambda r: r.spread)
    return (f'warning: {len(noisy)} of {len(timed)} timings have a min-max spread above {threshold:.0%} of the '
            f'median (worst: {worst.kernel} on {worst.matrix}, {worst.system}: {worst.spread:.1f}x); the machine '
            f'was noisy — close other work and rerun, or raise --repeat')


def _runtime_names(paths) -> str:
    return ', '.join(os.path.basename(p) for p in paths) or 'none'


def _isolation_lines(m) -> List[str]:
    """How the systems shared processes, and the OpenMP runtimes they loaded."""
    if m.get('isolation') == 'separate':
        per = m.get('openmp_by_system', {})
        return ['isolation: separate (a process per system); OpenMP runtimes: ' +
                '; '.join(f'{name}: {_runtime_names(rec.get("mapped", []))}' for name, rec in per.items())]
    rec = m.get('openmp')
    if not rec:
        return []
    out = [f'isolation: same (all systems in one process, calls alternating, every system after every other); OpenMP: ours '
           f'{os.path.basename(rec.get("runtime") or "?")} ({rec.get("action")}), '
           f'mapped: {_runtime_names(rec.get("mapped", []))}']
    if rec.get('competing'):
        out.append(f'warning: other OpenMP runtimes in use beside ours ({_runtime_names(rec["competing"])})'
                   '; their thread teams compete with ours for the cores (see sdfgsparse.targets.cpu.openmp)')
    return out


def _target_line(m) -> Optional[str]:
    """The compiler and the compile target of the generated code (``machine.target``)."""
    t = m.get('target')
    if not t:
        return None
    march = f'-march={t["march"]}' if t.get('march') else 'no -march (the compiler\'s default)'
    return (f'target: {t.get("cpu", "?")}; compiler {t.get("compiler", "?")} ({t.get("compiler_version", "?")}); '
            f'{march} (native here: {t.get("native", "?")}), {t.get("vector_bytes", "?")}-byte vectors; '
            f'threads {m.get("threads")}')


def _warm_call_lines(m) -> List[str]:
    """The warm-call measurement (runner.warm_call), sdfgsparse first, then the peers from
    the fastest, with ours against the fastest peer."""
    w = m.get('warm_call')
    if not w or 'sdfgsparse' not in w.get('min_us', {}):
        return []
    lo, med = w['min_us'], w['median_us']
    peers = sorted((k for k in lo if k not in ('sdfgsparse', 'sdfgsparse-mkl')), key=lambda k: lo[k])
    ours = lo['sdfgsparse']
    versus = f'; sdfgsparse / fastest peer ({peers[0]}): {ours / lo[peers[0]]:.2f}' if peers else ''
    systems = ['sdfgsparse'] + [k for k in lo if k == 'sdfgsparse-mkl'] + peers
    how = 'rounds' if m.get('isolation') == 'separate' else 'interleaved rounds'
    return ['', f'warm call: SpMV of a {w["matrix"]} matrix, us per call (min / median of {w["rounds"]} '
            f'{how} of {w["calls"]}){versus}',
            '  ' + '   '.join(f'{k} {lo[k]:.2f} / {med[k]:.2f}' for k in systems)]


def format_report(result: BenchResult) -> str:
    """The whole report as text (see the module docstring)."""
    m = result.machine
    out = [
        f'machine: {m.get("cpu", "?")}, {m.get("cores", "?")} cores, {m.get("memory_GiB", 0):.0f} GiB; '
        f'threads {m.get("threads")}; STREAM triad {m.get("stream_triad_GBps", 0):.1f} GB/s '
        f'({m.get("stream_method", "?")}, {m.get("stream_array_MiB", 0):.0f} MiB arrays); '
        f'{m.get("repeat")} timed runs after {m.get("warmup")} warm-up, interleaved'
    ]
    target = _target_line(m)
    if target:
        out.append(target)
    out += _isolation_lines(m)
    for name, why in sorted(m.get('peers_skipped', {}).items()):
        out.append(f'peer {name}: MISSING, {why}; the best-peer ratios leave it out')
    out += _warm_call_lines(m)
    if result.compile:
        out.append('')
        out.append('sdfgsparse compile time (s): kernel  cold build  warm cache')
        for c in result.compile:
            if c.get('error'):
                out.append(f'  {c["kernel"]:<8} build failed: {c["error"]}')
                continue
            cold = f'{c["cold_s"]:.2f}' + (' (in memory)' if c.get('in_memory') else '') + \
                (' (CMake seeded)' if c.get('cmake_seeded') else '')
            warm = '' if c.get('warm_cache_s') is None else f'{c["warm_cache_s"]:.2f}'
            if c.get('warm_cache_rebuilt'):
                warm += ' (cache missed: rebuilt)'
            out.append(f'  {c["kernel"]:<8} {cold:>10}  {warm}')
    if result.optimize:
        out.append('')
        out += _optimize_lines(result.optimize, list(m.get('kernels', [])))
    kernels: List[str] = []
    for r in result.results:
        if r.kernel not in kernels:
            kernels.append(r.kernel)
    for k in kernels:
        out.append('')
        out += _kernel_table(k, [r for r in result.results if r.kernel == k])
        if k == 'spmv' and m.get('model_cache_MiB'):
            out.append(f'  spmv GB/s: bytes a perfect SpMV moves (the matrix and y once, the lines of x that miss an '
                       f'LRU model of the {m["model_cache_MiB"]:.0f} MiB last-level cache) / time')
    bad = [r for r in result.results if not r.correct]
    if bad:
        out.append('')
        for r in bad:
            out.append(f'{r.system} {r.kernel} on {r.matrix}: {r.error}')
    noted = [r for r in result.results if r.note]
    if noted:
        out.append('')
        for r in noted:
            out.append(f'note: {r.system} {r.kernel} on {r.matrix}: {r.note}')
    if result.skipped:
        out.append('')
        for s in result.skipped:
            out.append(f'skipped {s["kernel"]} on {s["matrix"]}: {s["reason"]}')
    warning = noise_warning(result)
    if warning:
        out.append('')
        out.append(warning)
    return '\n'.join(out)
