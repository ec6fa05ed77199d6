"""The row loops of a cpu kernel run in parallel where the library node runs outside any
parallel scope, and sequentially inside a parallel map. (A kernel parsed from source once
read an n:m format's ``N / 4`` groups through a symbol bound one nested SDFG deeper, where
DaCe schedules a default map as one inside a parallel map: an n:m SDDMM ran on one thread,
2x slower on two cores; the builder's kernels read such sizes directly.)"""
import copy
import re

import dace
from dace.sdfg import infer_types

import sdfgsparse as ss

M, N, K = dace.symbol('M'), dace.symbol('N'), dace.symbol('K')


@dace.program
def nm_sddmm(A: ss.NM[2, 4][dace.float32, M, N], G: dace.float32[M, K], XT: dace.float32[K, N]):
    return ss.sddmm(A, G, XT)


def _functions(sdfg, prefix: str):
    """``{function name: body}`` of the generated C++ functions whose names start with ``prefix``."""
    sdfg = copy.deepcopy(sdfg)
    infer_types.set_default_schedule_and_storage_types(sdfg)  # as a compile does before expanding
    sdfg.expand_library_nodes()
    code = '\n'.join(c.clean_code for c in sdfg.generate_code())
    out = {}
    for m in re.finditer(r'inline void (' + prefix + r'\w*)\(', code):
        out[m.group(1)] = code[m.end():code.find('\n}\n', m.end())]
    return out


def test_bound_kernel_rows_run_in_parallel():
    bodies = _functions(nm_sddmm.to_sdfg(), 'sddmm')
    rows = [b for b in bodies.values() if 'structured_sddmm_rows' in b]
    assert rows, sorted(bodies)
    loop = rows[0][:rows[0].find('structured_sddmm_rows')]
    assert re.search(r'#pragma omp parallel for[^\n]*\n\s*for \(auto i = 0; i < M;', loop), loop

