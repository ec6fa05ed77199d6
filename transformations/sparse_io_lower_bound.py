"""``SparseIOLowerBound``: the SOAP I/O lower bound written onto the SDFG, where an editor
shows it."""
from typing import Any, Dict, Optional

import dace
from dace import properties

from sdfgsparse.notes import NOTES
from sdfgsparse.analysis.io_pass import IOLowerBoundPass
from sdfgsparse.analysis.lower_bound import IOBoundResult, io_lower_bound
from sdfgsparse.analysis.user_symbols import readable
from sdfgsparse.analysis.sparse_models import STAT_KEYS
from sdfgsparse.ops.base import SparseLibraryNode
from sdfgsparse.transformations.examples import recorded_all_stats, recorded_sizes

__all__ = ['SparseIOLowerBound']

KEY = 'io_lower_bound'


@properties.make_properties
class SparseIOLowerBound(IOLowerBoundPass):
    """Computes the SOAP I/O lower bound of the SDFG (see
    :func:`sdfgsparse.analysis.io_lower_bound`) and records it on the SDFG, so that the
    DaCe VS Code extension (which does not list analysis passes) and a saved file show it.

    Applying it changes no node, edge or array. It writes:

    * the SDFG property ``sparse_notes['io_lower_bound']``: the total bound ``Q >= ...``
      in words, its leading terms, per statement and per sparse operation the bound, the
      iteration count and the intensity, and the notes; and, where example arguments were
      recorded (``ss.optimize(..., matrices=)``, ``sdfgsparse annotate``), the bound
      evaluated at their sizes (``at_examples``, in words and bytes);
    * the ``io_lower_bound`` property of every sparse library node: that node's bound.

    The structure statistics recorded with the examples (``nnz``, ``max_row``, ...) feed
    the sparse models. Like ``IOLowerBoundPass`` (the analysis for pipelines, which only
    returns the result), it returns the
    :class:`~sdfgsparse.analysis.lower_bound.IOBoundResult`.

    Properties (those of ``IOLowerBoundPass``):

    * ``cache_words``: fast-memory size in words; 0 keeps the bound symbolic in ``S``.
    """

    CATEGORY: str = 'Sparse'  # (IOLowerBoundPass is 'Analysis', which the extension does not list)

    def apply_pass(self, sdfg: dace.SDFG, pipeline_results: Dict[str, Any]) -> Optional[IOBoundResult]:
        stats = recorded_all_stats(sdfg, STAT_KEYS)  # (format statistics hold more)
        result = io_lower_bound(sdfg, self.cache_words or None, stats=stats or None)
        summary = result.to_dict()
        sizes = recorded_sizes(sdfg)
        if sizes and self.cache_words:
            names = {s.name for s in result.total.free_symbols}
            if names <= set(sizes):
                words = result.evaluate(**{k: v for k, v in sizes.items() if k in names})
                summary['at_examples'] = {'words': words, 'bytes_float64': 8 * words,
                                          'sizes': {result.names.get(k, k): v for k, v in sizes.items()}}
        notes = dict(getattr(sdfg, NOTES))
        notes[KEY] = summary
        setattr(sdfg, NOTES, notes)
        bounds = {o.name: readable(f'Q >= {o.bound} words ({o.op}; |V| = {o.model.volume})', result.names)
                  for o in result.sparse_ops}
        for node, _ in sdfg.all_nodes_recursive():
            if isinstance(node, SparseLibraryNode):
                node.io_lower_bound = bounds.get(node.label, 'not analysed (see sparse_notes of the SDFG)')
        return result

