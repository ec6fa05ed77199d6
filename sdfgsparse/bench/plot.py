"""``--plot FILE.png``: one figure with

- per kernel, the speedup of every system over scipy on each matrix (log scale, grouped
  bars; above 1 is faster than scipy), and
- a bandwidth roofline: GFLOP/s against arithmetic intensity (flops per compulsory byte)
  for the SpMV and SpMM points of every system, under the line ``STREAM triad × intensity``.

Needs matplotlib (extra ``bench``); :func:`write_plot` returns a one-line reason instead of
plotting when it is missing.
"""
import math
from typing import Dict, List, Optional

from sdfgsparse.bench.results import ALL_SYSTEMS, BenchResult

__all__ = ['write_plot']

_COLORS = {'sdfgsparse-opt': '#8c1c13', 'sdfgsparse': '#d62728', 'scipy': '#7f7f7f', 'torch': '#ff7f0e', 'graphblas': '#2ca02c',
           'pydata': '#9467bd', 'mkl': '#1f77b4'}


def write_plot(result: BenchResult, path: str) -> Optional[str]:
    """Write the PNG; returns None, or why no plot was written (matplotlib missing, no data)."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return 'matplotlib is not installed (pip install matplotlib); no plot written'
    timed = [r for r in result.results if r.timed]
    if not timed:
        return 'no timed result to plot'
    kernels: List[str] = []
    for r in timed:
        if r.kernel not in kernels:
            kernels.append(r.kernel)
    cols = 2
    nplots = len(kernels) + 1
    nrows = math.ceil(nplots / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(7 * cols, 3.6 * nrows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, kernel in zip(flat, kernels):
        rs = [r for r in timed if r.kernel == kernel]
        matrices = list(dict.fromkeys(r.matrix for r in rs))
        base: Dict[str, float] = {r.matrix: r.median_s for r in rs if r.system == 'scipy'}
        systems = [s for s in ALL_SYSTEMS if s != 'scipy' and any(r.system == s for r in rs)]
        width = 0.8 / max(1, len(systems))
        for i, s in enumerate(systems):
            xs, ys = [], []
            for j, m in enumerate(matrices):
                r = next((r for r in rs if r.system == s and r.matrix == m), None)
                if r is not None and m in base and r.median_s > 0:
                    xs.append(j + (i - (len(systems) - 1) / 2) * width)
                    ys.append(base[m] / r.median_s)
            ax.bar(xs, ys, width=width, label=s, color=_COLORS.get(s))
        ax.axhline(1.0, color='black', linewidth=0.8)
        ax.set_yscale('log')
        ax.set_xticks(range(len(matrices)))
        ax.set_xticklabels(matrices, rotation=30, ha='right', fontsize=7)
        ax.set_title(f'{kernel}: speedup over scipy', fontsize=9)
        ax.legend(fontsize=7, ncol=3)
    ax = flat[len(kernels)]
    bw = result.machine.get('stream_triad_GBps')
    points = [r for r in timed if r.kernel.split(':')[0] in ('spmv', 'spmm') and r.bytes > 0 and r.gflops]
    if points and bw:
        intensities = [r.flops / r.bytes for r in points]
        lo, hi = min(intensities) / 2, max(intensities) * 2
        ax.plot([lo, hi], [bw * lo, bw * hi], color='black', linewidth=1, label=f'STREAM triad {bw:.1f} GB/s')
        for s in ALL_SYSTEMS:
            for family, marker in (('spmv', 'o'), ('spmm', '^')):
                mine = [r for r in points if r.system == s and r.kernel.split(':')[0] == family]
                if mine:
                    ax.scatter([r.flops / r.bytes for r in mine], [r.gflops for r in mine], s=20, marker=marker,
                               color=_COLORS.get(s), label=f'{s} {family}', alpha=0.8)
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('flops per compulsory byte')
        ax.set_ylabel('GFLOP/s')
        ax.set_title('SpMV / SpMM on the bandwidth roofline', fontsize=9)
        ax.legend(fontsize=6, ncol=2)
    else:
        ax.set_axis_off()
    for extra in flat[nplots:]:
        extra.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
