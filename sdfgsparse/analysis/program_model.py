"""The loop-nest model of a program that the SOAP analysis and the cache simulator read.

:func:`sdfgsparse.analysis.sdfg_extract.extract` turns an SDFG into a :class:`ProgramModel`:
a tree of :class:`Scope` nodes (sequential loops and parallel maps, in program order)
whose leaves are :class:`Statement` objects. A statement is one tasklet (or a chain of
tasklets joined by scalar temporaries) inside its whole loop/map nest; it knows its
iteration variables (:class:`Dim`, outermost first) and its :class:`Access` list, with
index expressions written in the iteration variables and the program's own symbols.

Iteration variables are fresh symbols, unique in the whole model (an inner ``i`` that
shadows an outer ``i`` becomes ``i_1``), so statements can be compared and grouped by
symbol identity: two statements inside the same loop share that loop's symbol.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple, Union

import sympy

__all__ = ['Dim', 'Access', 'Statement', 'Scope', 'LibraryCall', 'ProgramModel', 'READ', 'WRITE', 'UPDATE']

#: access kinds: a plain read, a plain (over)write, and a read-modify-write of the same
#: element by the same statement (``+=``, write-conflict resolution, in-place updates)
READ, WRITE, UPDATE = 'read', 'write', 'update'


@dataclass(eq=False)
class Dim:
    """One iteration variable: ``for sym in range(start, stop, step)``.

    :param sym: the (unique) symbol of the variable.
    :param name: the variable's name in the program.
    :param start: first value (symbolic; may use outer variables).
    :param stop: exclusive end (symbolic).
    :param step: stride (a positive integer for the analysis to count iterations).
    :param sequential: True for a loop (order matters), False for a map dimension.
    """
    sym: sympy.Symbol
    name: str
    start: sympy.Expr
    stop: sympy.Expr
    step: sympy.Expr = sympy.Integer(1)
    sequential: bool = False

    @property
    def extent(self) -> sympy.Expr:
        if self.step == 1:
            return self.stop - self.start
        return sympy.ceiling((self.stop - self.start) / self.step)

    def __repr__(self):
        kind = 'for' if self.sequential else 'map'
        return f'{kind} {self.sym} in [{self.start}, {self.stop})'


@dataclass(eq=False)
class Access:
    """A memlet of a statement: ``array[index]`` read, written or updated.

    ``index`` holds one expression per array dimension; ``exact`` is False when some
    index could not be expressed (ranges inside a tasklet memlet, indirection), in which
    case those positions hold ``None`` and the analysis treats them as opaque.
    """
    array: str
    index: Tuple[Optional[sympy.Expr], ...]
    kind: str = READ
    exact: bool = True

    def __repr__(self):
        idx = ', '.join('?' if i is None else str(i) for i in self.index)
        return f'{self.array}[{idx}]'


@dataclass(eq=False)
class Statement:
    """A statement with its iteration domain (``dims``) and access functions."""
    name: str
    dims: List[Dim]
    accesses: List[Access]
    order: int = 0
    notes: List[str] = field(default_factory=list)
    #: a loop/map range depends on values read from memory (e.g. a lowered sparse kernel)
    data_dependent: bool = False

    @property
    def syms(self) -> List[sympy.Symbol]:
        return [d.sym for d in self.dims]

    def arrays(self, kinds=(READ, WRITE, UPDATE)) -> Set[str]:
        return {a.array for a in self.accesses if a.kind in kinds}

    def __repr__(self):
        return f'Statement({self.name}: {self.dims} {self.accesses})'


@dataclass(eq=False)
class Scope:
    """A node of the loop tree: ``kind`` is ``'root'``, ``'loop'`` or ``'map'``."""
    kind: str
    dims: List[Dim] = field(default_factory=list)
    children: List[Union['Scope', Statement]] = field(default_factory=list)
    label: str = ''


@dataclass(eq=False)
class LibraryCall:
    """A library node the analysis models by its known domain (sparse operations).

    :param cls_name: ``type(node).__name__`` (``SpMV``, ``SpMM``, ``SDDMM``, ``SpGEMM``).
    :param operands: connector prefix or name -> (array name, descriptor shape).
    :param sparse: sparse operand prefix -> dict with ``name``, ``rows``, ``cols``, ``nnz``.
    :param dims: iteration variables of the loops/maps around the node.
    """
    name: str
    cls_name: str
    dense: Dict[str, Tuple[str, tuple]] = field(default_factory=dict)
    sparse: Dict[str, dict] = field(default_factory=dict)
    dims: List[Dim] = field(default_factory=list)
    order: int = 0


@dataclass(eq=False)
class ProgramModel:
    """What :func:`~sdfgsparse.analysis.sdfg_extract.extract` reads from an SDFG."""
    root: Scope
    statements: List[Statement]
    library_calls: List[LibraryCall]
    skipped: List[str]
    transients: Set[str]
    symbols: Set[sympy.Symbol]
    notes: List[str] = field(default_factory=list)
    #: the program's sparse arguments (non-transient structures), read by analysed calls or not
    sparse_arguments: Set[str] = field(default_factory=set)
