"""``--isolation separate``: each system timed in a process of its own, the results merged.

``--isolation same`` (the default) times every system in one process, called in a random
order each round: what a user sees who runs sdfgsparse next to torch, GraphBLAS and MKL,
with their OpenMP runtimes and thread teams loaded side by side
(:mod:`sdfgsparse.targets.cpu.openmp`). ``separate`` runs one child process per system
(``--only NAME``; the child still checks against scipy, which starts no threads), so
that no system's threads or runtime touch another's: the ratios then measure the
kernels alone. Each child measures its own STREAM triad; the report takes sdfgsparse's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Optional

from sdfgsparse.bench.argv import to_argv
from sdfgsparse.bench.results import BenchResult

__all__ = ['ISOLATIONS', 'system_names', 'run_separate', 'merge']

ISOLATIONS = ('same', 'separate')


def system_names(config) -> List[str]:
    """The systems of ``config`` in the order the same-process run lists them."""
    from sdfgsparse.bench.programs import MKL_SYSTEM, OPT_SYSTEM, MKLSystem
    mkl = [MKL_SYSTEM] if config.with_mkl and MKLSystem().available() is None and any(
        k.name in MKLSystem.KERNELS for k in config.kernels) else []
    return ([OPT_SYSTEM] if config.optimize else []) + ['sdfgsparse'] + mkl + list(config.peers)


def run_separate(args, config, log: Callable[[str], None], env: Optional[dict] = None) -> BenchResult:
    """Run ``sdfgsparse bench`` once per system of ``config`` (``args``: this run's parsed
    options; each child gets them, ``--march`` included, with ``--only`` its system, its own
    JSON file, no plot, no progress bar, no ``--check`` and no ``--busy``: this process checks
    and runs busy) and merge the results. A child that fails is reported through
    ``log`` and leaves its system out."""
    parts = []
    for name in system_names(config):
        with tempfile.TemporaryDirectory(prefix='sdfgsparse-bench-') as tmp:
            path = os.path.join(tmp, 'result.json')
            child = argparse.Namespace(**{**vars(args), 'isolation': 'same', 'only': name, 'json': path, 'plot': None,
                                          'no_progress': True, 'check': False, 'busy': False})
            words = to_argv(child)
            t0 = time.perf_counter()
            log(f'{name}: its own process')
            proc = subprocess.run([sys.executable, '-m', 'sdfgsparse.bench.cli'] + words, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if not os.path.exists(path):
                tail = ' | '.join(proc.stdout.strip().splitlines()[-3:])
                log(f'{name}: its process failed (exit status {proc.returncode}): {tail}')
                continue
            with open(path) as f:
                parts.append((name, BenchResult.from_dict(json.load(f))))
            log(f'{name}: done in {time.perf_counter() - t0:.0f} s')
    return merge(parts)


def merge(parts) -> BenchResult:
    """One :class:`BenchResult` of the per-system runs ``[(name, result)]``: results,
    compile and optimize records concatenated; the machine record of sdfgsparse's run
    (its STREAM triad) with every run's versions and missing peers, and each run's
    OpenMP runtimes under ``openmp_by_system``."""
    out = BenchResult()
    if not parts:
        return out
    main = next((r for name, r in parts if name == 'sdfgsparse'), parts[0][1])
    out.machine = dict(main.machine)
    out.machine.update(isolation='separate', versions={}, peers_skipped={}, openmp_by_system={})
    seen = set()
    for name, r in parts:
        out.machine['versions'].update(r.machine.get('versions', {}))
        out.machine['peers_skipped'].update(r.machine.get('peers_skipped', {}))
        out.machine['openmp_by_system'][name] = r.machine.get('openmp', {})
        out.results += r.results
        out.compile += r.compile
        out.optimize += r.optimize
        for s in r.skipped:
            key = (s['kernel'], s['matrix'])
            if key not in seen:
                seen.add(key)
                out.skipped.append(s)
    out.machine.pop('openmp', None)
    calls = [r.machine['warm_call'] for _, r in parts if r.machine.get('warm_call')]
    if calls:  # each system's warm call, measured in its own process
        out.machine['warm_call'] = dict(calls[0], min_us={}, median_us={})
        for w in calls:
            out.machine['warm_call']['min_us'].update(w['min_us'])
            out.machine['warm_call']['median_us'].update(w['median_us'])
    return out
