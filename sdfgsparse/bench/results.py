"""What a benchmark run produces: one :class:`Result` per (kernel, matrix, system), the
machine description and the compile times, and their JSON form.

JSON (``--json FILE``)::

    {"machine": {"threads": int, "stream_triad_GBps": float, "stream_method": str,
                 "cpu": str, "cores": int, "memory_GiB": float, "llc_MiB": float | null,
                 "versions": {system or library: str}, "peers_skipped": {peer: reason},
                 "repeat": int, "warmup": int, "quick": bool, "timestamp": str, ...},
     "compile": [{"kernel", "cold_s", "in_memory", "cmake_seeded", "warm_cache_s", "warm_cache_rebuilt", "error"}],
     "optimize": [{"kernel", "matrix", "heuristics_ms", "optimize_s", "build_s", "steps", "error"}],
     "skipped": [{"kernel", "matrix", "reason"}],
     "results": [{"kernel", "matrix", "system", "median_s", "min_s", "max_s", "correct",
                  "gflops", "gbps", "bw_fraction", "peak_mem_bytes", "runs", "nnz", "rows",
                  "cols", "flops", "bytes", "error", "note"}]}

``system`` is one of ``sdfgsparse``, ``scipy``, ``torch``, ``graphblas``, ``pydata``,
``mkl``, and ``sdfgsparse-opt`` with ``--optimize`` (the ``optimize`` section, one record per
kernel and matrix — see :mod:`sdfgsparse.bench.programs` — and ``machine.optimize: true``
are there only then). A wrong or failed result has ``correct: false``, its reason in ``error`` and null
timings (it was not timed); ``note`` says when sdfgsparse copied an argument. ``gbps`` is the compulsory bytes of the kernel
(:mod:`sdfgsparse.bench.kernels`) divided by the median time, ``bw_fraction`` that over
``stream_triad_GBps``.

``machine.target`` is the compile target of the generated code
(:func:`sdfgsparse.targets.cpu.march.describe`: ``{"cpu", "compiler", "compiler_version",
"march", "native", "vector_bytes", "flags"}``). With ``--busy`` the file holds the quiet run
as above and beside it ``busy`` (the busy run, same schema, ``machine.busy_cores``: the cores
the spinners held, ``machine.busy_core`` the first of them), ``single_thread`` (our
single-thread quiet run, same schema; null where it failed) and ``busy_summary`` (``[{"kernel", "matrix", "system", "busy_s", "single_s",
"peer", "peer_busy_s", "vs_single", "vs_peer"}]``, :mod:`sdfgsparse.bench.busy`).
"""
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ['SYSTEMS', 'ALL_SYSTEMS', 'OURS', 'JUDGED', 'Result', 'BenchResult', 'RESULT_KEYS']

SYSTEMS = ['sdfgsparse', 'sdfgsparse-mkl', 'scipy', 'torch', 'graphblas', 'pydata', 'mkl']
ALL_SYSTEMS = ['sdfgsparse-opt'] + SYSTEMS  # with --optimize
#: Our systems (not peers): the optimised programs, the programs, and the programs with the
#: ``mkl`` implementations (SpMV, SpMM, SpGEMM; where the [mkl] extra is installed).
OURS = ('sdfgsparse-opt', 'sdfgsparse', 'sdfgsparse-mkl')
#: Those that ``--check`` and ``--busy`` judge, in that order: the default path and ss.optimize's.
JUDGED = ('sdfgsparse', 'sdfgsparse-opt')

RESULT_KEYS = ['kernel', 'matrix', 'system', 'median_s', 'min_s', 'max_s', 'correct', 'gflops', 'gbps']


@dataclass
class Result:
    """One system's measurement of one kernel on one matrix (times in seconds)."""
    kernel: str
    matrix: str
    system: str
    median_s: Optional[float] = None
    min_s: Optional[float] = None
    max_s: Optional[float] = None
    correct: bool = False
    gflops: Optional[float] = None
    gbps: Optional[float] = None
    bw_fraction: Optional[float] = None
    peak_mem_bytes: Optional[int] = None
    runs: int = 0
    nnz: int = 0
    rows: int = 0
    cols: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    error: Optional[str] = None
    note: Optional[str] = None

    @property
    def timed(self) -> bool:
        return self.correct and self.median_s is not None

    @property
    def spread(self) -> float:
        """``(max - min) / median`` of the timed runs (0 when not timed)."""
        if not self.timed or not self.median_s:
            return 0.0
        return (self.max_s - self.min_s) / self.median_s


@dataclass
class BenchResult:
    """A whole run: the machine, the compile times, what was skipped, the results, and
    (``--optimize``) the ``ss.optimize`` records."""
    machine: Dict[str, Any] = field(default_factory=dict)
    compile: List[Dict[str, Any]] = field(default_factory=list)
    skipped: List[Dict[str, str]] = field(default_factory=list)
    results: List[Result] = field(default_factory=list)
    optimize: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        d = {
            'machine': self.machine,
            'compile': self.compile,
            'skipped': self.skipped,
            'results': [asdict(r) for r in self.results],
        }
        if self.optimize:
            d['optimize'] = self.optimize
        return d

    def write_json(self, path: str, extra: Optional[Dict[str, Any]] = None) -> None:
        """Write :meth:`to_dict` (with the sections of ``extra`` beside it) to ``path``."""
        with open(path, 'w') as f:
            json.dump({**self.to_dict(), **(extra or {})}, f, indent=1)
            f.write('\n')

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> 'BenchResult':
        return cls(d.get('machine', {}), d.get('compile', []), d.get('skipped', []),
                   [Result(**r) for r in d.get('results', [])], d.get('optimize', []))
