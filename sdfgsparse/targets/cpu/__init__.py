"""The ``cpu`` implementations of the sparse library nodes: today's tuned CPU kernels.

Importing this package registers them onto the node classes of :mod:`sdfgsparse.ops`
(:mod:`.expansions`, one module per node file; ``cpu`` becomes each node's default) and
registers sdfgsparse's expansions of DaCe's dense ``MatMul``, ``Dot`` and ``Transpose``
(:mod:`.dense_products`).

An expansion writes its loop nest as short NumPy-style Python that DaCe's frontend parses
(:mod:`.kernel`, :mod:`.entries`), with the hot row loops as C++ tasklets (GCC vector
extensions, OpenMP pragmas, per-thread workspaces): :mod:`.dense_loops` (SpMV, SpMM,
SDDMM rows), :mod:`.gustavson` (SpGEMM), :mod:`.row_union` (A ± B), :mod:`.rowwise` (the
count / fill shape both share), :mod:`.compress` (expand-sort-compress), the storage
checks compiled into every kernel (:mod:`.storage_check`) and inside row walks
(:mod:`.kernel_checks`). Each is tested against the portable ``pure`` SDFG of the same
node (:mod:`sdfgsparse.lowering.graph`).

Every program with CSR / CSC arguments also exports one entry for warm calls, written
after the program by DaCe's code generator (:mod:`.entry`).
"""
from sdfgsparse.targets.cpu import dense_products, entry, expansions

__all__ = ['dense_products', 'entry', 'expansions']
