"""The DaCe VS Code extension's entry to sdfgsparse (a custom-transformations file).

``sdfgsparse vscode-setup`` writes ``.vscode/settings.json`` with this file's absolute
path in ``dace.optimization.customTransformationsPaths``, so the extension's backend
imports it as soon as it starts (before it fetches the property metadata or lists
transformations); "Load custom transformations" with this file does the same by hand.

Importing sdfgsparse registers its data formats, library nodes (SDFGs with sparse
operations load and expand in the editor), its transformations (CATEGORY 'Sparse':
SparseFormatInference, SparseLoopOrdering, SparseFusion, SparseEpilogueFusion,
SparseDenseTiling, SparseFormatSelection, SparseMultiPumping; listed wherever they
match) and the SparseIOLowerBound pass (listed among the passes; applying it writes the
I/O lower bound into the SDFG's sparse_notes and each sparse node's io_lower_bound).

It also makes the backend check every SDFG it parses by DaCe's schema and the grammars of
:mod:`sdfgsparse.scripting.sdfg_schema` before DaCe evaluates any of its expressions
(:mod:`sdfgsparse.vscode.guard`), and verify every transformation the editor applies: the
SDFG before and after runs on small random inputs, and one that changes the result comes
back to the editor as an error, the document unchanged
(:mod:`sdfgsparse.vscode.verified_apply`; ``SDFGSPARSE_VSCODE_VERIFY=0`` turns it off).
"""
import sdfgsparse  # noqa: F401  (registers formats, library nodes, transformations and frontend operators)
from sdfgsparse.vscode import guard, verified_apply
from sdfgsparse.transformations import *  # noqa: F401,F403
from sdfgsparse.transformations import __all__ as TRANSFORMATIONS  # noqa: F401

guard.install()
verified_apply.install_in_importer()  # the backend's module that is importing this file
