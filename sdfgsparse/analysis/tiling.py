"""The machine facts the data-movement model reads: cache sizes (Linux sysfs) and the
thread count the generated code runs with.

Tile sizes of SpMM's dense loop are chosen by :mod:`sdfgsparse.analysis.schedules`, which
counts the walks over ``A`` a tile costs at both cache levels (the L2-fit closed form that
was here tiled too finely; ``docs/performance.md`` says where).
"""
import os

__all__ = ['machine_cache_bytes', 'machine_threads']

_FALLBACK_CACHE = 1 << 20


def machine_cache_bytes(level: int = 2) -> int:
    """Size of one core's cache of the given level (Linux sysfs); 1 MiB if unknown."""
    base = '/sys/devices/system/cpu/cpu0/cache'
    try:
        for entry in sorted(os.listdir(base)):
            d = os.path.join(base, entry)
            with open(os.path.join(d, 'level')) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(d, 'type')) as f:
                if f.read().strip() == 'Instruction':
                    continue
            with open(os.path.join(d, 'size')) as f:
                text = f.read().strip().upper()
            scale = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}.get(text[-1], 1)
            return int(text.rstrip('KMG')) * scale
    except (OSError, ValueError):
        pass
    return _FALLBACK_CACHE


def machine_threads() -> int:
    """Threads the generated code runs with: ``OMP_NUM_THREADS`` if set, else the CPU count."""
    env = os.environ.get('OMP_NUM_THREADS', '')
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)
