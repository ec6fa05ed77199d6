"""Multi-pumping on DaCe 1.0.2's Xilinx backend: which processing elements can be pumped,
the pumping itself, the host launch of the pumped kernel, and its clocks.

A *processing element* (PE) is a concurrent subgraph (``dace.sdfg.concurrent_subgraphs``)
of an FPGA kernel state: DaCe's Xilinx code generator makes each one a dataflow module.
Multi-pumping a PE by ``F`` (approach 2 of DaCe's ``TemporalVectorization``) runs it on a
second clock ``F`` times as fast as the memory clock, over vectors ``F`` times narrower:
the same throughput with ``1/F`` of the arithmetic units. ``Gearbox`` library nodes turn
each ``W``-wide boundary stream into a ``W/F``-wide one (``<stream>_pumped``) and back,
and the code generator moves the PE and its gearboxes into a second kernel
(``<kernel>_pumped``, an ``.ip.cpp`` plus RTL wrappers with two clocks).

What this module fixes in DaCe 1.0.2 (``dace/transformation/subgraph/temporal_vectorization.py``,
``TemporalVectorization.apply``, and ``dace/codegen/targets/xilinx.py``):

- *the pumped map's range*: ``apply`` sets ``end = (end + 1) * 2 - 1`` on dimension 0 of the
  map whatever ``factor`` is; with ``F = 4`` the pumped loop stopped halfway and the PE
  downstream starved (deadlock). :func:`pump` sets ``F`` times the original iteration
  count, computed before the rewrite;
- *the gearbox sizes*: ``apply`` sizes each ``Gearbox`` from ``end + 1`` of dimension 0 of
  the map, which is the number of wide vectors only for a 1-D map starting at 0 with step
  1. :func:`pump` sets the map's whole iteration count;
- *the host launch* (:func:`patch_pumped_host`): the host code declares the pumped
  kernel's function commented out (``//DACE_EXPORTED void <k>_pumped(...)``) and launches
  it as ``program.MakeKernel("<k>_pumped_top", ...)`` without the function, which in a
  simulation never runs it (the PEs around it block forever). The C-simulation
  (:mod:`.csim`) patches each generated program folder: signature uncommented, function
  passed. Only for the C-simulation, which compiles the ``.ip.cpp`` with the other device
  units; DaCe's CMake flow does not link it into the host library (FINDINGS.md section 5).

A third workaround lives in :mod:`sdfgsparse._dace_compat` (patch 20): the code generator
told whether a stream leaves a PE by comparing stream *descriptors* structurally, so two
streams of the same type and depth in one PE hid each other and the stream to the pumped
kernel became a FIFO local to its producer (deadlock).

Clocks: DaCe's code generation does not read ``compiler.xilinx.frequency``; the generated
sources of a pumped program are identical with or without it (checked). Only DaCe's
CMake/Vitis flow reads it (``XilinxCodeGen.cmake_options``). :func:`kernel_clocks` gives
the value for a pumped program (``"0:<memory>\\|1:<F * memory>"``, DaCe's format) and
:func:`clock_config` sets it for the duration of a Vitis build, not globally. The
C-simulation needs neither.

Not fixed (hardware only; the C-simulation cannot see them): once a state has a pumped
kernel, DaCe counts every stream between two PEs of the *slow* kernel as a kernel port
(``#pragma HLS INTERFACE axis``, created by the host, passed to every module, with no
``stream_connect`` in ``link.cfg``); the pumped kernel is ``ap_ctrl_none`` yet takes its
size symbols as scalar arguments; DaCe's CMake passes only clock 0 of the frequency to
``v++ --kernel_frequency`` (the second clock's frequency never reaches the linker) and the
packaging script sets ``FREQ_HZ`` 250 MHz for both clocks.
"""
import contextlib
import dataclasses
import os
import re
from typing import Iterator, List, Optional, Sequence, Set, Tuple

import dace
from dace import data as dt
from dace import dtypes, nodes
from dace.sdfg import utils as sdutil
from dace.sdfg.state import SDFGState

__all__ = ['FACTORS', 'ProcessingElement', 'pumpable_elements', 'pe_reasons', 'pump', 'pumped_factors',
           'kernel_clocks', 'clock_config', 'patch_pumped_host', 'processing_element_of', 'pe_name']

#: The multi-pumping factors supported (the pumped clock runs at ``F`` times the memory clock).
FACTORS = (2, 4)
#: DaCe's default memory clock for pumped designs when none is configured (MHz; ``codegen/targets/rtl.py``).
DEFAULT_MEMORY_MHZ = 300


@dataclasses.dataclass
class ProcessingElement:
    """A processing element of an FPGA kernel state and whether it can be pumped.

    ``name``: the labels of its outermost maps (or of its top-level nodes when it has no
    map); ``subgraph``: the concurrent subgraph of ``state``; ``reasons``: why it cannot be
    pumped by the factor it was examined for (empty when it can)."""
    name: str
    state: SDFGState
    subgraph: 'dace.sdfg.scope.ScopeSubgraphView'
    factor: int
    reasons: Tuple[str, ...] = ()

    @property
    def pumpable(self) -> bool:
        return not self.reasons

    @property
    def reason(self) -> Optional[str]:
        """The reasons joined into one line, or None when the PE can be pumped."""
        return '; '.join(self.reasons) if self.reasons else None

    def __repr__(self) -> str:
        what = 'pumpable' if self.pumpable else f'not pumpable: {self.reason}'
        return f'<PE {self.name!r} of state {self.state.label!r}, factor {self.factor}: {what}>'


def _kernel_states(sdfg: dace.SDFG) -> Iterator[SDFGState]:
    for state in _all_states(sdfg):
        if sdutil.is_fpga_kernel(state.sdfg, state):
            yield state


def _all_states(sdfg: dace.SDFG) -> Iterator[SDFGState]:
    for g in sdfg.all_sdfgs_recursive():
        yield from g.states()


def _outermost_maps(subgraph) -> List[nodes.MapEntry]:
    scope = subgraph.graph.scope_dict()
    return [n for n in subgraph.nodes() if isinstance(n, nodes.MapEntry) and scope[n] is None]


def pe_name(subgraph) -> str:
    """A processing element's name: the labels of its outermost maps (else of its nodes)."""
    maps = _outermost_maps(subgraph)
    if maps:
        return ','.join(m.map.label for m in maps)
    scope = subgraph.graph.scope_dict()
    return ','.join(sorted(str(n) for n in subgraph.nodes() if not isinstance(n, nodes.AccessNode) and
                           scope[n] is None)) or '?'


def _boundary(subgraph) -> List[Tuple[nodes.Node, bool]]:
    """(node, is_source) for the source and sink nodes of ``subgraph``."""
    return [(n, True) for n in subgraph.source_nodes()] + [(n, False) for n in subgraph.sink_nodes()]


def _dynamic_range(entry: nodes.MapEntry) -> List[str]:
    """The connectors that make the range of ``entry`` depend on data."""
    return sorted(c for c in entry.in_connectors if not c.startswith('IN_'))


def _body_symbols(state: SDFGState, entry: nodes.MapEntry) -> Set[str]:
    """Symbols read inside the scope of ``entry`` (its range excluded)."""
    exit_ = state.exit_node(entry)
    body = state.scope_subgraph(entry, include_entry=False, include_exit=False)
    used = set()
    for n in body.nodes():
        if isinstance(n, nodes.Tasklet):
            used |= set(map(str, n.free_symbols))
        elif isinstance(n, nodes.MapEntry):
            used |= set(map(str, n.map.range.free_symbols))
        elif isinstance(n, nodes.NestedSDFG):
            for v in n.symbol_mapping.values():
                used |= set(map(str, dace.symbolic.pystr_to_symbolic(v).free_symbols))
    edges = list(body.edges()) + list(state.out_edges(entry)) + list(state.in_edges(exit_))
    for e in edges:
        if not e.data.is_empty():
            used |= set(map(str, e.data.free_symbols))
    return used


def pumped_factors(sdfg: dace.SDFG) -> Set[int]:
    """The factors by which processing elements of ``sdfg`` are multi-pumped (from their
    gearboxes: wide over narrow vector length)."""
    from dace.libraries.standard import Gearbox
    found = set()
    for state in _all_states(sdfg):
        for n in state.nodes():
            if isinstance(n, Gearbox) and n.schedule == dtypes.ScheduleType.FPGA_Multi_Pumped:
                lanes = [state.sdfg.arrays[e.data.data].veclen for e in state.all_edges(n) if not e.data.is_empty()]
                if len(lanes) == 2 and min(lanes) > 0:
                    found.add(max(lanes) // min(lanes))
    return found


def pe_reasons(sdfg: dace.SDFG, state: SDFGState, subgraph, factor: int) -> Tuple[str, ...]:
    """Why the processing element ``subgraph`` of the kernel state ``state`` cannot be
    multi-pumped by ``factor``; empty when it can. The conditions of DaCe's
    ``TemporalVectorization.can_be_applied`` (approach 2), each with its reason, plus those
    :func:`pump` needs to get the iteration counts right for any factor."""
    if factor not in FACTORS:
        return (f'factor {factor} is not one of {FACTORS}', )
    owner = state.sdfg
    maps = _outermost_maps(subgraph)
    if not maps:
        return ('no map: nothing to pump', )
    if any(m.map.schedule == dtypes.ScheduleType.FPGA_Multi_Pumped for m in maps):
        return ('already multi-pumped', )
    reasons = []
    if len(maps) > 1:
        reasons.append(f'{len(maps)} map nests (a pumped PE is one map)')
    boundary = _boundary(subgraph)
    boundary_nodes = {n for n, _ in boundary}
    for n, is_source in boundary:
        if not isinstance(n, nodes.AccessNode):
            reasons.append(f'{n} at its boundary is not a data container')
            continue
        desc = owner.arrays[n.data]
        if isinstance(desc, dt.Stream):
            if desc.is_stream_array():
                reasons.append(f'stream array {n.data} at its boundary')
            elif not isinstance(desc.dtype, dtypes.vector):
                reasons.append(f'scalar stream {n.data} ({desc.dtype.to_string()}) at its boundary '
                               '(approach 2 narrows vector streams)')
            elif desc.dtype.veclen % factor:
                reasons.append(f'stream {n.data} carries {desc.dtype.veclen} lanes, not a multiple of factor {factor}')
            elif f'{n.data}_pumped' in owner.arrays:
                reasons.append(f'the name {n.data}_pumped is taken')
            elif (subgraph.out_degree(n) if is_source else subgraph.in_degree(n)) != 1:
                reasons.append(f'stream {n.data} has more than one edge into the PE')
        elif isinstance(desc, dt.Scalar):
            reasons.append(f'scalar {n.data} at its boundary (only vector streams can be narrowed)')
        elif desc.storage == dtypes.StorageType.FPGA_Global:
            reasons.append(f'global array {n.data} at its boundary (only streams can cross into the pumped clock)')
        else:
            reasons.append(f'array {n.data} ({desc.storage.name}) at its boundary (only streams can be narrowed)')
    internal = {n.data for n in subgraph.nodes() if isinstance(n, nodes.AccessNode) and n not in boundary_nodes}
    for other in dace.sdfg.concurrent_subgraphs(state):
        if set(other.nodes()) == set(subgraph.nodes()):
            continue
        shared = internal & {n.data for n in other.nodes() if isinstance(n, nodes.AccessNode)}
        if shared:
            reasons.append(f'{", ".join(sorted(shared))} also used by PE {pe_name(other)}')
    entry = maps[0] if len(maps) == 1 else None
    if entry is not None and _dynamic_range(entry):
        reasons.append(f'data-dependent map range ({", ".join(_dynamic_range(entry))}): the pumped iteration '
                       'count must be known when the PE starts')
    dynamic = {}  # inner maps of data-dependent range: the streams they access
    for n, is_source in boundary:
        if not isinstance(n, nodes.AccessNode) or not isinstance(owner.arrays[n.data], dt.Stream):
            continue
        edges = subgraph.out_edges(n) if is_source else subgraph.in_edges(n)
        if len(edges) != 1:
            continue
        path = state.memlet_path(edges[0])
        if is_source:
            inner_edge, scopes = path[-1], [e.src for e in path if isinstance(e.src, nodes.MapEntry)]
            innermost = scopes[-1] if scopes else None
        else:
            inner_edge, scopes = path[0], [e.dst for e in path if isinstance(e.dst, nodes.MapExit)]
            innermost = state.entry_node(scopes[0]) if scopes else None
        if innermost is None:
            reasons.append(f'stream {n.data} is accessed outside the map')
        elif innermost is not entry and _dynamic_range(innermost):
            dynamic.setdefault(innermost, []).append(n.data)
        elif entry is not None and innermost is not entry:
            reasons.append(f'stream {n.data} is accessed inside a nested map ({innermost.map.label})')
        elif inner_edge.data.dynamic or inner_edge.data.volume != 1:
            reasons.append(f'stream {n.data} is not accessed exactly once per iteration')
    for inner, streams in dynamic.items():
        reasons.append(f'data-dependent map range of {inner.map.label} ({", ".join(_dynamic_range(inner))}), '
                       f'where {", ".join(streams)} {"is" if len(streams) == 1 else "are"} accessed')
    used = set(entry.map.params) & _body_symbols(state, entry) if entry is not None else set()
    if used:
        reasons.append(f'the map body reads its iteration variable(s) {", ".join(sorted(used))}: pumping changes '
                       'the iteration space')
    others = pumped_factors(sdfg) - {factor}
    if others:
        reasons.append(f'the program is already pumped by {min(others)} (DaCe emits one second clock)')
    if not reasons:
        from dace.transformation.subgraph import TemporalVectorization
        tv = TemporalVectorization()
        tv.factor, tv.approach = factor, 2
        if not tv.can_be_applied(sdfg, subgraph):
            reasons.append("DaCe's TemporalVectorization.can_be_applied refuses it")
    return tuple(reasons)


def pumpable_elements(sdfg: dace.SDFG, factor: int = 2) -> List[ProcessingElement]:
    """Every processing element of every FPGA kernel state of ``sdfg`` (nested SDFGs
    included), each with the reasons it cannot be multi-pumped by ``factor`` (none when it
    can).

    >>> [pe.name for pe in pumpable_elements(sdfg) if pe.pumpable]   # doctest: +SKIP
    ['multiply']
    """
    out = []
    for state in _kernel_states(sdfg):
        for sg in dace.sdfg.concurrent_subgraphs(state):
            out.append(ProcessingElement(pe_name(sg), state, sg, factor, pe_reasons(sdfg, state, sg, factor)))
    return out


def pump(sdfg: dace.SDFG, subgraph, factor: int) -> nodes.MapEntry:
    """Multi-pump the processing element ``subgraph`` by ``factor`` (it must have no
    :func:`pe_reasons`): DaCe's ``TemporalVectorization`` (approach 2) inserts the
    gearboxes and narrows the streams; the map's range and the gearbox sizes are then set
    right for any factor (see the module). Returns the pumped map's entry."""
    from dace.libraries.standard import Gearbox
    from dace.transformation.subgraph import TemporalVectorization
    state = subgraph.graph
    entry, = _outermost_maps(subgraph)
    wide_iterations = entry.map.range.num_elements()
    dim0 = entry.map.range.size()[0]
    before = {n for n in state.nodes() if isinstance(n, Gearbox)}
    tv = TemporalVectorization()
    tv.factor, tv.approach = factor, 2
    tv.setup_match(subgraph)
    tv.apply(sdfg)
    # DaCe: end = (end + 1) * 2 - 1 whatever the factor. The body does not read the map's
    # parameters (pe_reasons), so dimension 0 may simply count factor times its iterations.
    entry.map.range.ranges[0] = (0, dim0 * factor - 1, 1)
    # DaCe: Gearbox(end + 1 of dimension 0); a gearbox converts every wide vector of the map.
    for n in state.nodes():
        if isinstance(n, Gearbox) and n not in before:
            n.size = wide_iterations
    return entry


def kernel_clocks(sdfg: dace.SDFG, memory_mhz: Optional[int] = None) -> Optional[str]:
    """The ``compiler.xilinx.frequency`` value a Vitis build of ``sdfg`` needs:
    ``'"0:<memory>\\|1:<factor * memory>"'`` (DaCe's format), or None when nothing in it is
    multi-pumped. ``memory_mhz``: the memory clock; default: clock 0 of the configured
    frequency, else DaCe's 300 MHz."""
    factors = pumped_factors(sdfg)
    if not factors:
        return None
    if len(factors) > 1:
        raise ValueError(f'{sdfg.name}: processing elements pumped by different factors {sorted(factors)}; '
                         "DaCe's pumped kernels share one second clock")
    if memory_mhz is None:
        configured = str(dace.Config.get('compiler', 'xilinx', 'frequency')).strip().strip('"')
        found = re.match(r'^(?:0:)?(\d+)(?:$|\\?\|)', configured)
        memory_mhz = int(found.group(1)) if found else DEFAULT_MEMORY_MHZ
    if int(memory_mhz) <= 0:
        raise ValueError(f'memory_mhz={memory_mhz!r}: a clock frequency in MHz must be positive')
    return f'"0:{int(memory_mhz)}\\|1:{int(memory_mhz) * factors.pop()}"'


@contextlib.contextmanager
def clock_config(sdfg: dace.SDFG, memory_mhz: Optional[int] = None):
    """Within the block, ``compiler.xilinx.frequency`` is :func:`kernel_clocks` of ``sdfg``
    (unchanged when nothing is pumped); for DaCe's CMake/Vitis build of a pumped program::

        with clock_config(sdfg):
            sdfg.compile()
    """
    clocks = kernel_clocks(sdfg, memory_mhz)
    if clocks is None:
        yield None
        return
    with dace.config.set_temporary('compiler', 'xilinx', 'frequency', value=clocks):
        yield clocks


_SIGNATURE = re.compile(r'^//(DACE_EXPORTED void (\w+_pumped)\()', re.MULTILINE)
_LAUNCH = re.compile(r'\.MakeKernel\("(\w+)_pumped_top",')


def patch_pumped_host(folder: str) -> List[str]:
    """Make the host code generated into the program folder ``folder`` launch its pumped
    kernels in a C-simulation (see the module); returns the files changed. Idempotent;
    folders without a pumped kernel are left alone."""
    changed = []
    host = os.path.join(folder, 'src', 'xilinx', 'host')
    for name in sorted(os.listdir(host)) if os.path.isdir(host) else ():
        path = os.path.join(host, name)
        if not name.endswith('.cpp') or not os.path.isfile(path):
            continue
        with open(path) as f:
            text = f.read()
        new = _SIGNATURE.sub(r'\1', text)
        new = _LAUNCH.sub(r'.MakeKernel(\1_pumped, "\1_pumped_top",', new)
        if new != text:
            with open(path, 'w') as f:
                f.write(new)
            changed.append(path)
    return changed


def processing_element_of(sdfg: dace.SDFG, where: Sequence) -> Tuple[SDFGState, 'dace.sdfg.scope.ScopeSubgraphView']:
    """The processing element named by ``where``: a :class:`ProcessingElement`, a subgraph
    view, or nodes of one PE (the whole PE is meant)."""
    from dace.sdfg.graph import SubgraphView
    if len(where) == 1 and isinstance(where[0], (list, tuple)):
        where = where[0]
    if len(where) == 1 and isinstance(where[0], ProcessingElement):
        state, picked = where[0].state, set(where[0].subgraph.nodes())
    elif len(where) == 1 and isinstance(where[0], SubgraphView):
        state, picked = where[0].graph, set(where[0].nodes())
    elif where and all(isinstance(n, nodes.Node) for n in where):
        state = next((s for s in _all_states(sdfg) if where[0] in s.nodes()), None)
        if state is None:
            raise ValueError(f'{where[0]} is not a node of {sdfg.name}')
        picked = set(where)
    else:
        raise TypeError('where: a ProcessingElement (pumpable_elements), a subgraph view of one, or its nodes; '
                        f'got {where!r}')
    if not isinstance(state, SDFGState) or not sdutil.is_fpga_kernel(state.sdfg, state):
        raise ValueError(f'{getattr(state, "label", state)} is not an FPGA kernel state')
    matches = [sg for sg in dace.sdfg.concurrent_subgraphs(state) if picked & set(sg.nodes())]
    if len(matches) != 1 or not picked <= set(matches[0].nodes()):
        raise ValueError(f'the nodes given span {len(matches)} processing elements of {state.label}; '
                         'name one processing element')
    return state, matches[0]
