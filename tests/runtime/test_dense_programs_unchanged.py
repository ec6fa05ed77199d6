"""Importing sdfgsparse leaves dense DaCe programs as DaCe makes them: in two fresh
processes, one with ``import sdfgsparse`` (and a sparse program built and run first, so our
build policy has come and gone) and one without, DaCe's configuration, the generated code
of a few dense programs in DaCe's own test idioms (a GEMM, a stencil with reductions,
``np.maximum`` / ``np.minimum`` with NaN) and their results are the same."""
import json
import os
import subprocess
import sys
import textwrap


SCRIPT = textwrap.dedent('''
    import hashlib, json, sys
    import numpy as np
    import dace
    if sys.argv[1] == 'with':
        import scipy.sparse as sp
        import sdfgsparse as ss
        M, K = dace.symbol('M'), dace.symbol('K')

        @dace.program
        def sparse_first(A: ss.CSR[dace.float64, M, K], x: dace.float64[K]):
            return np.maximum(A @ x, 0.0)

        A = sp.random_array((30, 20), density=0.2, format='csr', rng=np.random.default_rng(1))
        x = np.random.default_rng(2).standard_normal(20)
        assert np.allclose(sparse_first(A, x), np.maximum(A @ x, 0.0))
    N = dace.symbol('N')

    @dace.program
    def dense_gemm(A: dace.float64[N, N], B: dace.float64[N, N]):
        return A @ B + 1.0

    @dace.program
    def dense_stencil(A: dace.float64[N]):
        out = np.zeros_like(A)
        out[1:-1] = (A[:-2] + A[1:-1] + A[2:]) / 3.0
        return out, np.sum(A), np.max(A)

    @dace.program
    def dense_extrema(X: dace.float64[N], Y: dace.float64[N]):
        return np.maximum(X, Y), np.minimum(X, 0.0)

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    v = rng.standard_normal(9)
    X = np.array([np.nan, 1.0, np.nan, 2.0, -np.inf, 0.5])
    Y = np.array([0.0, np.nan, np.nan, 1.0, np.nan, -0.5])
    cases = {'dense_gemm': (dense_gemm, (A, B)), 'dense_stencil': (dense_stencil, (v, )),
             'dense_extrema': (dense_extrema, (X, Y))}
    out = {'config': {k: str(dace.Config.get(*k.split('.'))) for k in
                      ('compiler.cpu.args', 'compiler.build_type', 'cache', 'compiler.cuda.cuda_arch',
                       'compiler.linker.args')},
           'code': {}, 'results': {}}
    for name, (prog, args) in cases.items():
        sdfg = prog.to_sdfg()
        text = '\\n'.join(c.clean_code for c in sdfg.generate_code())
        out['code'][name] = hashlib.sha256(text.encode()).hexdigest()
        res = prog(*args)
        res = res if isinstance(res, tuple) else (res, )
        out['results'][name] = [np.asarray(r).tolist() for r in res]
    print('RESULT ' + json.dumps(out))
''')


def _run(tmp_path, mode):
    env = {k: v for k, v in os.environ.items() if k not in ('DACE_default_build_folder', 'DACE_compiler_cpu_args')}
    env['DACE_default_build_folder'] = str(tmp_path / mode)
    script = tmp_path / 'dense_programs.py'  # (DaCe reads a program's source from its file)
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True, text=True,
                          timeout=900, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert line, proc.stdout[-2000:]
    return json.loads(line[-1][len('RESULT '):])


def test_dense_programs_are_daces_with_and_without_sdfgsparse(tmp_path):
    without, with_ = _run(tmp_path, 'without'), _run(tmp_path, 'with')
    assert with_['config'] == without['config']
    assert with_['code'] == without['code']
    assert json.dumps(with_['results']) == json.dumps(without['results'])  # bit for bit (NaN included)
    # DaCe's np.maximum(nan, 0) is 0 (a > b ? a : b); sdfgsparse leaves that to DaCe here
    assert without['results']['dense_extrema'][0][0] == 0.0
