"""How a target adds its implementations to the sparse library nodes.

A node file (:mod:`sdfgsparse.ops`) defines the node and its portable ``pure`` expansion
only; each target folder registers its own expansions onto the node classes when it is
imported, as DaCe's libraries do (``LibraryNode.register_implementation``), so a new
implementation family is one folder that touches no node file.
"""
from typing import Dict, List, Type

from dace.sdfg.nodes import LibraryNode
from dace.transformation.transformation import ExpandTransformation

__all__ = ['register', 'registered']

_REGISTERED: Dict[str, List[Type[LibraryNode]]] = {}


def register(node_cls: Type[LibraryNode], name: str, expansion: Type[ExpandTransformation],
             default: bool = False) -> None:
    """Add ``expansion`` to ``node_cls.implementations`` under ``name``; with ``default``,
    nodes of the class whose ``implementation`` is unset take it. Registering a name twice
    replaces the expansion (a module reloaded)."""
    if not (isinstance(node_cls, type) and issubclass(node_cls, LibraryNode)):
        raise TypeError(f'register: node_cls must be a library node class, got {node_cls!r}')
    if not (isinstance(expansion, type) and issubclass(expansion, ExpandTransformation)):
        raise TypeError(f'register: expansion must be an ExpandTransformation class, got {expansion!r}')
    node_cls.register_implementation(name, expansion)
    if default:
        node_cls.default_implementation = name
    nodes = _REGISTERED.setdefault(name, [])
    if node_cls not in nodes:
        nodes.append(node_cls)


def registered(name: str) -> List[Type[LibraryNode]]:
    """The node classes that implementation ``name`` was registered on (in order)."""
    return list(_REGISTERED.get(name, []))
