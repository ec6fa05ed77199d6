"""The thread count of a kernel's parallel row loop, chosen per call.

A parallel loop that :meth:`~sdfgsparse.targets.cpu.builder.CpuKernel.team` names gets
a state before it that calls ``sdfgsparse::team_begin`` and a state after it that calls
``sdfgsparse::team_end`` (``include/sdfgsparse_team.h``): a loop with little work runs on
the calling thread alone (no team to wake and no barrier to wait at), and above that each
loop compares the geometric means of its last 8 times per unit of work with the team and
with one thread, among calls of the same shape class (rows, columns per entry and entries,
each to a power of two: the layers of one network share a program), and runs with the faster, trying the other count now and then (ever more
rarely while it loses). So a call on a tiny matrix does not pay for a parallel region, and
a kernel whose team waits for a thread that another process has descheduled falls back to
one thread instead of running several times slower than it (figures, and the statistics
tried: docs/performance.md). A loop of 2**26 units of work or more always runs with the
team, unmeasured (a measuring call with one thread would cost the whole loop again). The
work of a call is ``nnz * scale + rows`` (``nnz``: the row walk's last position,
``scale``: the dense columns each entry feeds).
``SDFGSPARSE_TEAM=team`` (always the whole team) or ``one`` fixes the choice for a process.
"""
import hashlib
import os
from dataclasses import dataclass
from typing import Dict, List, Tuple

import dace
from dace import nodes
from dace.codegen.targets.cpp import sym2cpp

__all__ = ['TeamWork', 'HEADER', 'add_teams', 'row_maps']

#: The C++ header with ``team_begin`` / ``team_end``.
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'include', 'sdfgsparse_team.h')
#: Transient of the kernel that carries one call's record from ``team_begin`` to ``team_end``.
RECORD = '_ss_team'
SLOTS = 6


@dataclass(frozen=True)
class TeamWork:
    """The work of one call of a row loop: ``pos[rows] * scale + rows``.

    :param pos: the name of the position array of the walk (its entry at ``rows`` is the
                number of stored entries walked).
    :param rows: expression (kernel source names) of the loop's row count.
    :param scale: expression of the multiply-adds per stored entry (``'1'`` for SpMV,
                  the dense column count for SpMM and SDDMM).
    """
    pos: str
    rows: str
    scale: str = '1'


def row_maps(sdfg: dace.SDFG, variables) -> List[Tuple[object, nodes.MapEntry]]:
    """``(state, map entry)`` of every outermost parallel (Default or CPU_Multicore) map of
    ``sdfg`` over one variable of ``variables``: the row loops that
    :meth:`~sdfgsparse.targets.cpu.builder.CpuKernel.balance` and ``team`` name."""
    return [(state, node) for state in sdfg.all_states() for node in state.nodes()
            if isinstance(node, nodes.MapEntry) and state.entry_node(node) is None and len(node.map.params) == 1
            and node.map.params[0] in variables
            and node.map.schedule in (dace.ScheduleType.Default, dace.ScheduleType.CPU_Multicore)]


def add_teams(sdfg: dace.SDFG, works: Dict[str, TeamWork]) -> int:
    """Wrap every outermost parallel map of ``sdfg`` over a variable of ``works`` in the
    states calling ``team_begin`` and ``team_end``; returns how many were wrapped."""
    wrapped = 0
    for state, node in row_maps(sdfg, works) if works else ():
        if _only_map(state, node):
            _wrap(sdfg, state, works[node.map.params[0]])
            wrapped += 1
    return wrapped


def _only_map(state, entry) -> bool:
    """Whether ``entry`` is the state's one top-level map (so the states around the state
    are around the loop and nothing else runs in parallel beside it)."""
    return sum(1 for n in state.nodes() if isinstance(n, nodes.MapEntry) and state.entry_node(n) is None) == 1


def _record(sdfg: dace.SDFG) -> str:
    if RECORD not in sdfg.arrays:
        sdfg.add_array(RECORD, [SLOTS], dace.int64, transient=True, storage=dace.StorageType.Register)
    return RECORD


def _wrap(sdfg: dace.SDFG, state, work: TeamWork) -> None:
    record = _record(sdfg)
    cfg = state.parent_graph
    rows = sym2cpp(dace.symbolic.pystr_to_symbolic(work.rows))
    scale = sym2cpp(dace.symbolic.pystr_to_symbolic(work.scale))
    before = cfg.add_state_before(state, label=f'{state.label}_team_begin')
    # the loop's statistics, named by the kernel and the loop's state (the same in every process)
    site = int(hashlib.sha1(f'{sdfg.name}/{state.label}'.encode()).hexdigest()[:15], 16)
    begin = before.add_tasklet(
        'team_begin', {'_tnnz'}, {'_trec'},
        f'sdfgsparse::team_begin<{site}ULL>((long long)_tnnz, (long long)({scale}), (long long)({rows}), _trec);',
        language=dace.Language.CPP, side_effects=True)
    before.add_edge(before.add_read(work.pos), None, begin, '_tnnz', dace.Memlet(f'{work.pos}[{work.rows}]'))
    before.add_edge(begin, '_trec', before.add_write(record), None, dace.Memlet(f'{record}[0:{SLOTS}]'))
    after = cfg.add_state_after(state, label=f'{state.label}_team_end')
    end = after.add_tasklet('team_end', {'_trec'}, set(), 'sdfgsparse::team_end(_trec);',
                            language=dace.Language.CPP, side_effects=True)
    after.add_edge(after.add_read(record), None, end, '_trec', dace.Memlet(f'{record}[0:{SLOTS}]'))
