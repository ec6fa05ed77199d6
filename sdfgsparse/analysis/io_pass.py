"""The I/O lower-bound analysis as a DaCe ``Pass`` (pipelines, the VS Code extension)."""
from typing import Any, Dict, Optional

import dace
from dace import properties
from dace.transformation import pass_pipeline as ppl

from sdfgsparse.analysis.lower_bound import IOBoundResult, io_lower_bound

__all__ = ['IOLowerBoundPass']


@properties.make_properties
class IOLowerBoundPass(ppl.Pass):
    """SOAP I/O lower bound of the SDFG (see :func:`sdfgsparse.analysis.io_lower_bound`).

    An analysis: it modifies nothing and returns an
    :class:`~sdfgsparse.analysis.lower_bound.IOBoundResult`, which a pipeline stores as
    ``pipeline_results['IOLowerBoundPass']``.

    Properties:

    * ``cache_words`` -- fast-memory size in words; 0 keeps the bound symbolic in ``S``.
    """

    CATEGORY: str = 'Analysis'

    cache_words = properties.Property(dtype=int,
                                      default=0,
                                      desc='Fast-memory size in words (0: keep the symbol S in the bound)')

    def __init__(self, cache_words: int = 0):
        super().__init__()
        self.cache_words = cache_words

    def modifies(self) -> ppl.Modifies:
        return ppl.Modifies.Nothing

    def should_reapply(self, modified: ppl.Modifies) -> bool:
        return False

    def depends_on(self):
        return set()

    def apply_pass(self, sdfg: dace.SDFG, pipeline_results: Dict[str, Any]) -> Optional[IOBoundResult]:
        return io_lower_bound(sdfg, self.cache_words or None)

    def report(self, pass_retval: Any) -> Optional[str]:
        if pass_retval is None:
            return None
        return f'I/O lower bound: Q >= {pass_retval.total}'
