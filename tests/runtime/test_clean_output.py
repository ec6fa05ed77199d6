"""What a user sees while sdfgsparse builds: DaCe's benign warnings
(:data:`sdfgsparse._warnings.BENIGN`) do not reach the caller, a warning of the caller's
own (even with a DaCe message) still does, and the filters are put in place and taken away
safely from many threads. ``sdfgsparse demo`` on bad ``--matrices``: one line, exit 2; its
progress: a line per sample."""
import re
import sys
import threading
import warnings

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse import _warnings
from sdfgsparse._warnings import BENIGN, benign, benign_dace_warnings
from sdfgsparse.cli import main

N = dace.symbol('N')


def clean_output_program(A: ss.CSR[dace.float64, N, N]):
    return ss.softmax(A + A.T, axis=0)  # the add's row buffers: heap arrays; the column walks: memlets


def test_every_benign_warning_has_a_reason_and_a_dace_module():
    assert BENIGN
    for b in BENIGN:
        assert len(b.reason) > 40 and b.reason[0].islower(), b  # (a clause: 'benign because ...')
        assert b.module.startswith(r'dace\.') and issubclass(b.category, Warning), b
        re.compile(b.message), re.compile(b.module)
    assert len({b.message for b in BENIGN}) == len(BENIGN)


def test_a_build_shows_no_benign_dace_warning_but_the_callers_own(build, rng, monkeypatch):
    """One cold build (its own folder, kernels built again): DaCe warns (the spy sees it),
    the caller's record does not; the caller's warnings in the same block are recorded."""
    attempted = []
    warn = warnings.warn

    def spy(message, category=None, stacklevel=1, source=None):
        module = sys._getframe(1).f_globals.get('__name__', '')
        cat = category or (message.__class__ if isinstance(message, Warning) else UserWarning)
        attempted.append((str(message), cat, module))
        warn(message, category, stacklevel + 1, source)

    A = sp.random_array((24, 24), density=0.2, format='csr', rng=rng)
    with monkeypatch.context() as m, warnings.catch_warnings(record=True) as seen:
        m.setattr(warnings, 'warn', spy)
        warnings.simplefilter('always')
        got = dace.program(clean_output_program)(A)
        warnings.warn('the caller\'s own warning', UserWarning)
        # a DaCe message from the caller's own module: not DaCe's, shown
        warnings.warn('Cannot find appropriate memlet pattern to propagate i through 0:N', UserWarning)
    np.testing.assert_allclose(got.toarray(), ss.softmax(A + A.T, axis=0).toarray(), rtol=1e-12)

    kinds = {benign(*a).message for a in attempted if a[2].startswith('dace.') and benign(*a)}
    assert any(k.startswith('Variable-length') for k in kinds), attempted  # (else the test proves nothing)
    assert any(k.startswith('Cannot find') for k in kinds), attempted
    shown = [(str(w.message), w.filename) for w in seen]
    assert not [(msg, f) for msg, f in shown if f != __file__ and any(re.match(b.message, msg, re.I) for b in BENIGN)]
    assert [msg for msg, f in shown if f == __file__] == [
        "the caller's own warning", 'Cannot find appropriate memlet pattern to propagate i through 0:N']
    assert not any(f in warnings.filters for f in _warnings._FILTERS)  # nothing left behind


def _dace_warning(message: str, module: str = 'dace.sdfg.propagation'):
    """``message`` warned as if by DaCe's ``module`` (the filters match the module name)."""
    warnings.warn_explicit(message, UserWarning, f'/{module.replace(".", "/")}.py', 1, module=module,
                           registry={})


def test_filters_are_scoped_reentrant_and_thread_safe():
    text = 'Cannot find appropriate memlet pattern to propagate p1 through 0:N'
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter('always')
        errors = []
        barrier = threading.Barrier(8)

        def worker(i):
            try:
                barrier.wait()
                for _ in range(50):
                    with benign_dace_warnings():
                        with benign_dace_warnings():
                            _dace_warning(text)
                if i == 0:  # a filter another thread adds meanwhile stays
                    warnings.filterwarnings('ignore', message='one of the caller')
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i, )) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert not [w for w in seen if str(w.message) == text]
        assert not any(f in warnings.filters for f in _warnings._FILTERS)
        assert any(getattr(f[1], 'pattern', None) == 'one of the caller' for f in warnings.filters)
        _dace_warning(text)  # outside: shown again
        _dace_warning('Variable-length array x with size N detected and was allocated on heap instead of '
                      'StorageType.Register', 'dace.codegen.targets.cpu')
        with benign_dace_warnings():
            _dace_warning('Some other DaCe warning')  # not in the list: shown
            warnings.warn(text, DeprecationWarning)  # another category (and module): shown
    assert [str(w.message) for w in seen][-4:] == [
        text, 'Variable-length array x with size N detected and was allocated on heap instead of StorageType.Register',
        'Some other DaCe warning', text]
    assert warnings.filters == before


def test_benign_warnings_do_not_become_errors_under_w_error():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with benign_dace_warnings():
            _dace_warning("SDFG 'p' is already loaded by another object, recompiling under a different name 'p_0'.",
                          'dace.sdfg.sdfg')
        with pytest.raises(UserWarning, match='already loaded'):
            _dace_warning("SDFG 'p' is already loaded by another object, recompiling under a different name 'p_0'.",
                          'dace.sdfg.sdfg')


@pytest.mark.parametrize('make, match', [
    (lambda d: d / 'missing', 'no such folder; give a folder of .mtx'),
    (lambda d: d, r'holds no \.mtx or \.mtx\.gz file; give a folder'),
    (lambda d: (d / 'bad.mtx').write_text('not matrix market\n') and d, 'bad.mtx: not a readable Matrix Market file'),
    (lambda d: (d / 'b.mtx').write_text('%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 x\n') and d,
     'b.mtx: not a readable Matrix Market file'),
])
def test_demo_on_bad_matrices_says_one_line_and_exits_2(tmp_path, make, match, capsys):
    folder = make(tmp_path)
    assert main(['demo', '--matrices', str(folder)]) == 2
    out, err = capsys.readouterr()
    assert out == '' and err.startswith('sdfgsparse demo: --matrices') and err.count('\n') == 1, err
    assert re.search(match, err) and 'Traceback' not in err


def test_progress_lines_of_the_demo():
    """``sdfgsparse demo`` says which sample starts, on a line of its own, with the bar off
    (the bench's Progress, which draws nothing else then)."""
    import io
    from sdfgsparse.bench.progress import Progress
    out = io.StringIO()
    p = Progress(3, enabled=False, stream=out)
    for name in ('spmv', 'gcn', 'cg'):
        p.begin(name)
        p.step()
    p.close()
    assert out.getvalue() == '[1/3] spmv ...\n[2/3] gcn ...\n[3/3] cg ...\n'
