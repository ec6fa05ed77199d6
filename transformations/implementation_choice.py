"""Per-node choice among the implementation families a target registered, by measurement.

``ss.optimize(prog, matrices=...)`` on the CPU runs :func:`choose_implementations` after its
transformations: for each sparse node that another family serves (today ``mkl``, where the
``[mkl]`` extra is installed: SpMV, SpMM, SpGEMM), the program is built and timed on the
example arguments with the node on that family and on its default, and the node keeps the
other family only where the whole program got at least :data:`MARGIN` faster. The
measurement is one-time (part of ``ss.optimize``, not of a call) and needs every array
argument among the examples; a node the family does not serve as it stands (int64
indices, a fused epilogue, another format; ``unsupported``) is not tried.
"""
import copy
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import dace
import numpy as np

from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.targets import mkl
from sdfgsparse.targets.mkl import expansions as mkl_expansions

__all__ = ['Trial', 'choose_implementations', 'families', 'missing_arguments', 'measure', 'MARGIN', 'RUNS']

#: Fraction the program must gain for a node to leave its default implementation.
MARGIN = 0.10
#: Timed calls per variant (after one untimed call); their median counts.
RUNS = 7


@dataclass
class Trial:
    """One node tried on another family: medians of the whole program, in seconds."""
    node: str
    family: str
    default_s: float
    family_s: float
    chosen: bool

    def line(self) -> str:
        verdict = f'{self.family} kept' if self.chosen else 'default kept'
        return (f'{self.node}: {self.family} {self.family_s * 1e3:.3g} ms, default {self.default_s * 1e3:.3g} ms '
                f'-> {verdict}')


def families() -> Dict[str, Tuple[type, ...]]:
    """Implementation families available here beside the defaults: name -> the node classes
    they are registered on (:func:`_unsupported` says where a family does not serve a node)."""
    out = {}
    if mkl.available():
        out[mkl.IMPLEMENTATION] = tuple(mkl_expansions.NODES)
    return out


def _unsupported(family: str, node, state) -> Optional[str]:
    if family == mkl.IMPLEMENTATION:
        return mkl_expansions.unsupported(node, state)
    return None


def _candidates(sdfg: dace.SDFG, fams: Dict[str, Tuple[type, ...]]) -> List[Tuple[SparseLibraryNode, str]]:
    """(node, family) of the top-level sparse nodes a family serves."""
    return [(node, fam) for state in sdfg.states() for node in state.nodes() for fam, classes in fams.items()
            if isinstance(node, classes) and _unsupported(fam, node, state) is None]


def _fresh(arguments: Mapping[str, Any]) -> Dict[str, Any]:
    """The arguments with every NumPy array copied: a program may write its arguments, and
    neither the caller's examples nor the next timed call may see that."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in arguments.items()}


def measure(compile_fn: Callable[[dace.SDFG], Callable], sdfg: dace.SDFG, arguments: Mapping[str, Any]) -> float:
    """Median seconds of a call of ``sdfg`` built by ``compile_fn`` (one untimed call first),
    each call on its own copies of the dense arguments (made outside the timing)."""
    prog = compile_fn(copy.deepcopy(sdfg))
    prog(**_fresh(arguments))
    times = []
    for _ in range(RUNS):
        args = _fresh(arguments)
        t0 = time.perf_counter()
        prog(**args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def choose_implementations(sdfg: dace.SDFG, arguments: Mapping[str, Any], compile_fn: Callable[[dace.SDFG],
                                                                                                  Callable],
                           timer: Optional[Callable] = None) -> List[Trial]:
    """Try each node a family serves on that family (see the module); changes the nodes
    kept on it (their ``implementation``) in ``sdfg`` and returns every trial.

    :param arguments: the example arguments by name (every array argument of ``sdfg``).
    :param compile_fn: ``sdfg -> callable`` taking the arguments by name (``ss.compile``).
    :param timer: ``(compile_fn, sdfg, arguments) -> seconds`` (default :func:`measure`).
    """
    timer = timer or measure
    fams = families()
    found = _candidates(sdfg, fams)
    trials: List[Trial] = []
    if not found:
        return trials
    best = timer(compile_fn, sdfg, arguments)
    for node, fam in found:
        before = node.implementation
        node.implementation = fam
        t = timer(compile_fn, sdfg, arguments)
        keep = t < best * (1 - MARGIN)
        trials.append(Trial(f'{type(node).__name__} {node.label}', fam, best, t, keep))
        if keep:
            best = t
        else:
            node.implementation = before
    return trials


def missing_arguments(sdfg: dace.SDFG, arguments: Optional[Mapping[str, Any]]) -> List[str]:
    """Data arguments of ``sdfg`` without an example (a measurement needs them all; symbols
    come from the arrays)."""
    return sorted(n for n, d in sdfg.arrays.items()
                  if not d.transient and not n.startswith('__return') and n not in (arguments or {}))
