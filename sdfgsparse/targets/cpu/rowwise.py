"""The two-pass shape shared by row-parallel kernels whose result rows have data-dependent
lengths (:mod:`~sdfgsparse.targets.cpu.gustavson`, :mod:`~sdfgsparse.targets.cpu.row_union`):
a parallel map counts each result row (a C++ tasklet writing ``_tcnt``), a sequential
prefix sum turns the counts into the result's ``pos``, and a second parallel map fills
each row (a C++ tasklet writing through ``_oc`` / ``_ov`` at ``pos[i]``). Both tasklets
get the row as ``_ti``; the fill tasklet also gets the result's capacity as ``_tcap``
(unused in the code: it makes the kernel use the capacity's symbols, which DaCe 1.0.2
otherwise does not pass to the enclosing program, where an intermediate result is
allocated from them). Per-thread workspaces of a call (``workspaces``) are data both
tasklets write through a pointer; writing them orders a later step that frees them.
"""
from typing import Sequence, Tuple

from sdfgsparse._symbolic import pyexpr
from sdfgsparse.targets.cpu.kernel import KernelBuilder, cpp_tasklet

__all__ = ['emit_count_fill']


def emit_count_fill(kb: KernelBuilder, tag: str, rows, cap, count_inputs: Sequence[Tuple[str, str]],
                    fill_inputs: Sequence[Tuple[str, str]], out: dict, count_code: str, fill_code: str,
                    workspaces: Sequence[Tuple[str, str]] = ()):
    """Emit count, positions and fill into ``kb``.

    :param tag: a prefix for the kernel's own names (loop variables must not occur in the
                C++ code: DaCe 1.0.2 would take a C++ local of that name for the symbol).
    :param count_inputs, fill_inputs: ``(connector, data)`` pairs of each tasklet's inputs
                                      besides ``_ti`` (and ``_tcap``).
    :param out: names of the result's ``pos1`` / ``crd1`` / ``vals``.
    :param workspaces: ``(connector, data)`` pairs that both tasklets get as outputs (whole
                       arrays, e.g. a table of per-thread workspaces).
    """
    kb.globals['np'] = __import__('numpy')
    kb.symbols_of(rows, cap)
    R = pyexpr(rows)
    L = kb.line
    L(f'{tag}cap = dace.int64({pyexpr(cap)})')
    L(f'{tag}cnt = np.empty(({R},), dtype=dace.int64)')
    kb.balance('i')
    for step, inputs, code in (('count', count_inputs, count_code), ('fill', fill_inputs, fill_code)):
        L(f'for i in dace.map[0:{R}]:')
        L(f'    _{tag}{step} = dace.int64(i)')
        ins = [('_ti', f'_{tag}{step}')] + list(inputs)
        if step == 'count':
            outs, body = list(workspaces) + [('_tcnt', f'{tag}cnt[i]')], code
        else:
            ins.append(('_tcap', f'{tag}cap'))
            outs, body = list(workspaces) + [('_oc', out['crd1']), ('_ov', out['vals'])], f'(void)_tcap;\n{code}'
        for l in cpp_tasklet(ins, outs, body):
            L('    ' + l)
        if step == 'count':
            L(f'{out["pos1"]}[0] = 0')
            L(f'for {tag}_row in range(0, {R}):')
            L(f'    {out["pos1"]}[{tag}_row + 1] = {out["pos1"]}[{tag}_row] + {tag}cnt[{tag}_row]')
