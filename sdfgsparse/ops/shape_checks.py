"""Shape rules between operands that only the call can decide.

The frontend checks that the operands of an operation fit (``A @ x``: A's columns are x's
length) while it parses the program. With symbols on both sides (``A: ss.CSR[M, N]``,
``x: dace.float64[K]``; or an unannotated matrix, whose columns are a symbol of its own,
times an array of fixed length) that cannot be decided then, and nothing looked again: a
call with a vector of the wrong length ran the kernel, which read past its end (a wrong
result, no error). :func:`require_equal` raises when the rule is already broken and
otherwise records it in the SDFG's notes (:mod:`sdfgsparse.notes`: kept through a copy, a
save and a load, so a build loaded from the cache by another process checks it too);
:func:`violation` tells, from the symbol values of a call, the first rule the call breaks. Compiled programs check before every call
(:mod:`sdfgsparse.runtime.hooks`, and the warm call plans).
"""
from typing import Dict, List, Optional, Tuple

import dace

from sdfgsparse import errors, notes

__all__ = ['require_equal', 'rules', 'violation']

#: The key of the rules in an SDFG's notes: ``[{'a': expr, 'b': expr, 'reason': what}, ...]``
#: (the expressions as strings; ``reason`` is free text for the error).
KEY = 'shape_rules'


def require_equal(sdfg: dace.SDFG, a, b, what: str) -> None:
    """``a`` and ``b`` (sizes of operands, integers or symbolic) must be equal.

    :param what: the rule, for the error (``'A @ x: inner dimensions'``).
    :raises ShapeError: when they are definitely different.
    """
    diff = a - b
    if not dace.symbolic.issymbolic(diff):
        if diff != 0:
            raise errors.ShapeError(f'{what} differ ({a} vs {b})')
        return
    if dace.symbolic.simplify(diff) == 0:
        return
    found = notes.of(sdfg).setdefault(KEY, [])
    rule = {'a': str(a), 'b': str(b), 'reason': what}
    if rule not in found:
        found.append(rule)


def rules(sdfg: dace.SDFG) -> List[Tuple[str, str, str]]:
    """The rules recorded on ``sdfg`` and the SDFGs nested in it: (a, b, what)."""
    found = []
    for g in sdfg.all_sdfgs_recursive():
        for rule in notes.of(g).get(KEY, ()):
            rule = (rule['a'], rule['b'], rule['reason'])
            if rule not in found:
                found.append(rule)
    return found


def violation(compiled, symbols: Dict[str, int]) -> Optional[str]:
    """The message of the first rule that the symbol values of a call break (None: every
    rule whose symbols are all known holds). ``compiled``: the rules as
    :func:`sdfgsparse.runtime.symexpr.compile_rules` gives them."""
    for fa, fb, free, (a, b, what) in compiled:
        if not free <= symbols.keys():
            continue
        va, vb = fa(symbols), fb(symbols)
        if va != vb:
            sides = [str(v) if e == str(v) else f'{e} = {v}' for e, v in ((a, va), (b, vb))]
            return f'{what} differ ({sides[0]} vs {sides[1]})'
    return None
