"""The C++ leaves of the ``cpu`` (and ``mkl``) kernels are real header files: each compiles on
its own with the machine's C++ compiler, and the constants the Python side shares with them
agree."""
import os
import re
import shutil
import subprocess

import pytest

from sdfgsparse.targets.cpu import gustavson, storage_check
from sdfgsparse.targets.cpu.environment import INCLUDE
from sdfgsparse.targets.mkl import environment as mkl_env

HEADERS = sorted(f for f in os.listdir(INCLUDE) if f.endswith('.h'))
MKL_HEADER = os.path.join(os.path.dirname(mkl_env.__file__), 'include', 'sdfgsparse_mkl.h')


#: Explicit instances, so that the templates' bodies are compiled too.
INSTANCES = {
    'sdfgsparse_storage_check.h': '\n'.join(
        f'template int sdfgsparse::check_compressed<{t}>(const {t}*, long long, const {t}*, long long, long long, int, '
        f'int);\ntemplate int sdfgsparse::check_range<{t}>(const {t}*, long long, long long);'
        for t in ('int32_t', 'int64_t')) + '\n',
    'sdfgsparse_entry.h': '''
int entry_reads(const char* rec) {
  const sdfgsparse::EntryRecord r(rec);
  return (int)r.checks() + (r.state() != nullptr) + *r.get<int*>(0) + r.get<int>(1) + (int)r.get<float>(2) +
         (int)r.get<double>(3) + r.get<bool>(4) + (int)r.get<long long>(5);
}
''',
    'mkl': '\n'.join(
        f'template void sdfgsparse::mkl::csr_mm<{t}>(bool, long long, long long, long long, const int*, const int*, '
        f'const {t}*, const {t}*, long long, {t}*, long long);\n'
        f'template long long sdfgsparse::mkl::csr_spgemm<{t}>(long long, long long, long long, const int*, const int*, '
        f'const {t}*, const int*, const int*, const {t}*, int*, int*, {t}*, long long);'
        for t in ('float', 'double')) + '\n',
}
# the leaves the kernels call, with the pointer types DaCe's tasklets pass (dace.int64 is
# int64_t; values float or double; outputs written through non-const pointers)
_CALLS = {
    'sdfgsparse_rows.h': '''
  sdfgsparse::axpy_row<T>(y, b, 3, 4, v[0], 8);
  sdfgsparse::axpy_tile<T>(y, 1, 2, b, 3, 4, 2.0, 0, 8);
  y[0] = sdfgsparse::dot_rows<T>(ss_in(b), 1, 2, sdfgsparse::address<T>(sdfgsparse::transposed_rows<T>(b, 3, 4, 5)),
                                 1, 2, 8);
  sdfgsparse::spmm_row<4, T>(ss_out(y), ss_in(b), 8, c, v, 0, 5, 37);
  y[1] = sdfgsparse::spmv_row_chunks<1>(c, v, ss_in(b), 0, 9, 12) + sdfgsparse::spmv_row_chunks<4>(c, v, b, 0, 9, 12) +
         sdfgsparse::spmv_row_chunks<8>(c, v, b, 0, 9, 12) + sdfgsparse::spmv_row_chunks<16>(c, v, b, 0, 9, 12);
  y[3] = sdfgsparse::regular_rows<64, 16>(c, 100);
  sdfgsparse::sddmm_row<4, T>(ov, oc, ss_in(b) + 2 * 8, b, 8, c, v, 0, 9, 37);
  sdfgsparse::gemm_row_block<4, T>(y, ss_in(b), ss_in(b), 2, 10, 11, 37, 11, 37, 37);''',
    'sdfgsparse_kernel_checks.h': '''
  y[2] = sdfgsparse::spmv_row_checked<double, 2>(c, v, b, 0, 9, 12, 100) +
         sdfgsparse::spmv_row_checked<T, 1>(c, v, b, 0, 9, 12, 100) +
         sdfgsparse::spmv_row_checked<T, 0>(c, v, b, 0, 9, 12, 100);''',
    'sdfgsparse_gustavson.h': '''
  y[4] = sdfgsparse::gustavson_count<T, I>(ws, 100, lp, c, lp, c, 3);
  sdfgsparse::gustavson_fill<T, I>(ws, 100, oc, ov, lp, c, v, lp, c, v, lp, 3, 50);''',
    'sdfgsparse_row_union.h': '''
  sdfgsparse::rows_of_columns(op, oc, ov, lp, c, v, 10, 10);
  y[5] = sdfgsparse::union_count(lp, c, lp, c, 2);
  sdfgsparse::union_fill<T>(oc, ov, lp, c, v, lp, c, v, lp, 2, 50, -1);
  y[6] = sdfgsparse::intersect_count(lp, c, lp, c, 2);
  sdfgsparse::intersect_fill<T>(oc, ov, lp, c, v, lp, c, v, lp, 2, 50);
  y[7] = sdfgsparse::dedupe_count(lp, c, 2);
  sdfgsparse::dedupe_fill<T>(oc, ov, lp, c, v, lp, 2, 50);''',
}
for _header, _calls in _CALLS.items():
    INSTANCES[_header] = ''.join(
        f'void calls_{t}_{i}({t}* y, const {t}* b, const {i}* c, const {t}* v, uint64_t* ws, {i}* oc, {t}* ov, '
        f'int64_t* op, const int64_t* lp) {{\n  typedef {t} T; typedef {i} I; (void)sizeof(I);{_calls}\n}}\n'
        for t in ('float', 'double') for i in ('int32_t', 'int64_t'))


def _define(header: str, name: str) -> str:
    text = open(os.path.join(INCLUDE, header)).read()
    return re.search(rf'(?:#define {name}|constexpr long long {name} =) ([^;\n]+)', text).group(1)


def test_constants_shared_with_python():
    assert int(_define('sdfgsparse_gustavson.h', 'SS_GW_SLOTS')) == gustavson.SLOTS
    assert int(_define('sdfgsparse_gustavson.h', 'SS_GW_PREFETCH')) == gustavson.PREFETCH
    assert eval(_define('sdfgsparse_storage_check.h', 'STORAGE_CHECK_PARALLEL').replace('LL', '')) == \
        storage_check.PARALLEL
    assert gustavson.GLOBAL_CODE.strip() == '#include "sdfgsparse_gustavson.h"'


@pytest.mark.skipif(shutil.which('c++') is None, reason='no C++ compiler')
@pytest.mark.parametrize('march', ['x86-64-v2', 'x86-64-v3', 'x86-64-v4'])
@pytest.mark.parametrize('header', HEADERS + ['mkl'])
def test_each_header_compiles_alone(header, march, tmp_path):
    if header == 'mkl':
        if mkl_env.missing():
            pytest.skip(f'the [mkl] extra: {mkl_env.missing()}')
        path, flags = MKL_HEADER, [f'-I{mkl_env.include_dir()}', f'-I{INCLUDE}']
    else:
        path, flags = os.path.join(INCLUDE, header), [f'-I{INCLUDE}']
    prelude = '#define DACE_EXPORTED extern "C"\n'  # (dace/types.h, which generated code includes first)
    src = tmp_path / 'one.cpp'
    body = INSTANCES.get(header, '')
    # twice: the guard holds; sdfgsparse_cpu.h first, as DaCe includes the environment's headers
    cpu = os.path.join(INCLUDE, 'sdfgsparse_cpu.h')
    src.write_text(f'{prelude}#include <cstdint>\n#include "{cpu}"\n#include "{path}"\n#include "{path}"\n{body}')
    # DaCe's own standard (compiler.cpu.args: -std=c++14); every vector width the kernels are built for;
    # compiled to code (not only parsed), so that the instantiations meet the optimiser as DaCe's build does
    done = subprocess.run(['c++', '-std=c++14', f'-march={march}', '-fopenmp', '-O2', '-Wall', '-c', *flags,
                           str(src), '-o', str(tmp_path / 'one.o')],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
