"""Load this file in the DaCe VS Code extension ("Load custom transformations" in the
Transformations panel; the extension's backend imports it with
``importlib.util.spec_from_file_location``).

Importing sdfgsparse registers its library nodes (so SDFGs that contain sparse operations
load in the editor and expand there) and its transformations (``CATEGORY = 'Sparse'``), which
the extension then lists wherever they match: SparseFormatInference, SparseLoopOrdering,
SparseFusion, SparseEpilogueFusion, SparseDenseTiling — and the analysis pass
IOLowerBoundPass. The Python interpreter the extension uses must be the project's
environment (see settings.json next to this file).
"""
import sdfgsparse  # noqa: F401  (registers formats, library nodes and frontend operators)
from sdfgsparse.analysis import IOLowerBoundPass  # noqa: F401
from sdfgsparse.transformations import *  # noqa: F401,F403
from sdfgsparse.transformations import __all__ as TRANSFORMATIONS  # noqa: F401
