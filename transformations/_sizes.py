"""Shared model helper: the sizes a transformation's data-movement decision evaluates."""
from typing import Dict, Mapping, Optional

from sdfgsparse._symbolic import evaluate

__all__ = ['size_values', 'stored_slots']


def size_values(sdfg, sizes: Optional[Mapping[str, int]] = None) -> Dict[str, int]:
    """Symbol values by name: those recorded from example arguments
    (:mod:`sdfgsparse.transformations.examples`), the SDFG's constants, then the given ``sizes``."""
    from sdfgsparse.transformations.examples import recorded_sizes
    return {**recorded_sizes(sdfg), **{str(c): v for c, v in sdfg.constants.items()}, **dict(sizes or {})}


def stored_slots(st, values: Mapping[str, int]) -> Optional[int]:
    """Value slots of a sparse type (the last of its format's level counts) given symbol
    values; None when unknown."""
    return evaluate(st.fmt.counts(st.shape, st.sizes)[-1], values)
