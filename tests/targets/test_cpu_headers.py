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
    'mkl': '\n'.join(
        f'template void sdfgsparse::mkl::csr_mm<{t}>(bool, long long, long long, long long, const int*, const int*, '
        f'const {t}*, const {t}*, long long, {t}*, long long);\n'
        f'template long long sdfgsparse::mkl::csr_spgemm<{t}>(long long, long long, long long, const int*, const int*, '
        f'const {t}*, const int*, const int*, const {t}*, int*, int*, {t}*, long long);'
        for t in ('float', 'double')) + '\n',
}


def _define(header: str, name: str) -> str:
    text = open(os.path.join(INCLUDE, header)).read()
    return re.search(rf'(?:#define {name}|constexpr long long {name} =) ([^;\n]+)', text).group(1)


def test_constants_shared_with_python():
    assert int(_define('sdfgsparse_gustavson.h', 'SS_GW_SLOTS')) == gustavson.SLOTS
    assert eval(_define('sdfgsparse_storage_check.h', 'STORAGE_CHECK_PARALLEL').replace('LL', '')) == \
        storage_check.PARALLEL
    assert gustavson.GLOBAL_CODE.strip() == '#include "sdfgsparse_gustavson.h"'


@pytest.mark.skipif(shutil.which('c++') is None, reason='no C++ compiler')
@pytest.mark.parametrize('header', HEADERS + ['mkl'])
def test_each_header_compiles_alone(header, tmp_path):
    if header == 'mkl':
        if mkl_env.missing():
            pytest.skip(f'the [mkl] extra: {mkl_env.missing()}')
        path, flags = MKL_HEADER, [f'-I{mkl_env.include_dir()}', f'-I{INCLUDE}']
    else:
        path, flags = os.path.join(INCLUDE, header), [f'-I{INCLUDE}']
    prelude = '#define DACE_EXPORTED extern "C"\n'  # (dace/types.h, which generated code includes first)
    src = tmp_path / 'one.cpp'
    body = INSTANCES.get(header, '')
    src.write_text(f'{prelude}#include "{path}"\n#include "{path}"\n{body}')  # twice: the guard holds
    done = subprocess.run(['c++', '-std=c++17', '-fopenmp', '-fsyntax-only', '-Wall', *flags, str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
