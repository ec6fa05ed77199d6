"""``SparseMultiPumping``: multi-pump a streaming processing element of an FPGA kernel (its
compute runs at a multiple of the memory clock on narrower vectors)."""
import functools

import dace
from dace import properties
from dace.sdfg.graph import SubgraphView
from dace.transformation import transformation as xf

from sdfgsparse.targets.fpga import pumping
from sdfgsparse.targets.fpga.pumping import FACTORS, ProcessingElement, pumpable_elements

__all__ = ['SparseMultiPumping', 'pumpable_elements', 'ProcessingElement']


def _set_factor(self, value):
    if isinstance(value, bool) or not isinstance(value, int) or value not in FACTORS:
        raise ValueError(f'SparseMultiPumping: factor={value!r}; the multi-pumping factor must be one of {FACTORS} '
                         '(the pumped clock runs at factor times the memory clock)')
    self._factor = value


class _class_or_instance_method:
    """A classmethod that also sees the instance it is called on (``None`` from the class)."""

    def __init__(self, func):
        self.func = func
        functools.update_wrapper(self, func)

    def __get__(self, obj, cls):
        return functools.wraps(self.func)(functools.partial(self.func, cls, obj))


@properties.make_properties
class SparseMultiPumping(xf.SubgraphTransformation):
    """Multi-pumps a processing element (PE) of an FPGA kernel state: the PE runs on a second
    clock ``factor`` times as fast as the memory clock, over vectors ``factor`` times
    narrower (same throughput, ``1/factor`` of the DSPs). DaCe's ``TemporalVectorization``
    (approach 2) does the rewrite; its iteration counts are corrected for any factor (it
    doubles the map range whatever the factor and sizes the gearboxes from dimension 0
    only: :mod:`sdfgsparse.targets.fpga.pumping`).

    Matched subgraph: one PE (a concurrent subgraph of an FPGA kernel state), e.g. the
    element-wise core split out of a streaming SpMM::

        vb_s, xv_s (vec<W> streams) --> map t in 0:NNZ*K/W { pr = vb * xv } --> pr_s (vec<W>)

    becomes, in a second kernel ``<kernel>_pumped`` (two clocks)::

        vb_s --Gearbox--> vb_s_pumped (vec<W/F>) \\
        xv_s --Gearbox--> xv_s_pumped (vec<W/F>)  --> map t in 0:F*NNZ*K/W (FPGA_Multi_Pumped)
                                                      { pr = vb * xv } --> pr_s_pumped --Gearbox--> pr_s

    Applicability (:func:`~sdfgsparse.targets.fpga.pumping.pumpable_elements` lists every PE
    with the reasons it fails):

    - the PE is one map whose range does not depend on data (no dynamic range connectors)
      and whose body does not read its iteration variables;
    - everything at its boundary is a stream of ``dace.vector`` type whose vector length is
      a multiple of ``factor`` (no global arrays, scalars or scalar streams), read or
      written once per iteration directly in the map body;
    - its internal containers are not used by another PE; no other PE of the program is
      pumped by another factor (DaCe emits one second clock).

    Use::

        pe = next(p for p in pumpable_elements(sdfg, factor=4) if p.pumpable)
        SparseMultiPumping(factor=4).apply_to(sdfg, pe)     # or .apply_to(sdfg, pe, factor=4)

    ``apply_to`` takes a :class:`~sdfgsparse.targets.fpga.pumping.ProcessingElement`, a
    subgraph view of one PE, or any of its nodes (the whole PE is pumped). Building it: the
    C-simulation (:mod:`sdfgsparse.targets.fpga.csim`) launches the pumped kernel itself;
    a Vitis build needs the two clocks (:func:`~sdfgsparse.targets.fpga.pumping.clock_config`).

    Properties: ``factor`` (2 or 4).
    """
    CATEGORY = 'Sparse'

    factor = properties.Property(dtype=int, default=2, setter=_set_factor, choices=list(FACTORS),
                                 desc='Multi-pumping factor: the PE runs at factor times the memory clock on '
                                 'vectors factor times narrower (2 or 4)')

    def __init__(self, factor: int = 2):
        super().__init__()
        self.factor = factor

    # ------------------------------------------------------------------ predicates
    @staticmethod
    def _processing_element(sdfg, subgraph):
        """(state, PE) when ``subgraph`` is exactly one PE of an FPGA kernel state, else None."""
        try:
            state, pe = pumping.processing_element_of(sdfg, [subgraph])
        except (ValueError, TypeError):
            return None
        return (state, pe) if set(pe.nodes()) == set(subgraph.nodes()) else None

    def reasons(self, sdfg: dace.SDFG, subgraph: SubgraphView):
        """Why this transformation cannot pump ``subgraph`` (empty when it can)."""
        found = self._processing_element(sdfg, subgraph)
        if found is None:
            return ('not one processing element of an FPGA kernel state', )
        return pumping.pe_reasons(sdfg, found[0], found[1], self.factor)

    def can_be_applied(self, sdfg: dace.SDFG, subgraph: SubgraphView) -> bool:
        return not self.reasons(sdfg, subgraph)

    # ------------------------------------------------------------------ rewrite
    def apply(self, sdfg: dace.SDFG):
        """Pumps the matched PE; returns the pumped map's entry."""
        subgraph = self.subgraph_view(sdfg)
        found = self._processing_element(sdfg, subgraph)
        if found is None:
            raise ValueError('SparseMultiPumping: the matched subgraph is not one processing element')
        return pumping.pump(sdfg, found[1], self.factor)

    # ------------------------------------------------------------------ convenience
    @_class_or_instance_method
    def apply_to(cls, self, sdfg: dace.SDFG, *where, verify: bool = True, **options):
        """Pump the PE named by ``where`` (see the class); raises ``ValueError`` with the
        reasons when it cannot be pumped. Called on an instance, its ``factor`` is used
        (``SparseMultiPumping(factor=4).apply_to(sdfg, pe)``); keywords set properties."""
        inst = cls._instance(self, options)
        state, pe = pumping.processing_element_of(sdfg, where)
        inst.setup_match(pe)
        if verify:
            reasons = pumping.pe_reasons(sdfg, state, pe, inst.factor)
            if reasons:
                raise ValueError(f'SparseMultiPumping(factor={inst.factor}) cannot pump PE '
                                 f'{pumping.pe_name(pe)!r} of state {state.label!r}: {"; ".join(reasons)}')
        return inst.apply(sdfg)

    @_class_or_instance_method
    def can_be_applied_to(cls, self, sdfg: dace.SDFG, *where, **options) -> bool:
        """Whether :meth:`apply_to` with the same arguments would pump the PE."""
        inst = cls._instance(self, options)
        state, pe = pumping.processing_element_of(sdfg, where)
        return not pumping.pe_reasons(sdfg, state, pe, inst.factor)

    @classmethod
    def _instance(cls, template, options):
        inst = cls(factor=template.factor) if template is not None else cls()
        for name, value in options.items():
            if name != 'factor':
                raise ValueError(f'SparseMultiPumping: unknown option {name!r} (properties: factor)')
            inst.factor = value
        return inst
