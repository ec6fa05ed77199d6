"""One binder: every way to call a program reaches the built code through the plan's
compiled binder (warm calls) or the one full path (``CompiledProgram._full_call`` /
``call._full_call``, which diagnoses and raises), never through a binder of its own."""
import ast
import pathlib

import dace
import numpy as np
import pytest
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.runtime import plan as plan_mod
from sdfgsparse.runtime import targets

ROOT = pathlib.Path(__file__).resolve().parents[2]
M, N = (dace.symbol(s) for s in 'MN')

#: Call paths with a binding of their own, and why: none (the distributed layer agrees on
#: the arguments over MPI and takes its rows of them, then calls its CompiledProgram).
OWN_BINDING = {}


@dace.program
def paths_spmv(A: ss.CSR[dace.float64, M, N], x: dace.float64[N]):
    return A @ x


def _done(plans) -> int:
    return sum(p.run.done for p in plans)


def _plans(store) -> list:
    return [p for ps in store.get('_ss_plans', {}).values() for p in ps]


def test_hook_compile_and_optimize_take_the_binder(rng):
    """``@dace.program`` by position and by name, ``ss.compile`` and ``ss.optimize``: warm
    calls finish in the binder of their plan."""
    A = sp.random_array((30, 20), density=0.2, format='csr', rng=rng)
    x = rng.standard_normal(20)
    want = A @ x
    compiled = ss.compile(paths_spmv.to_sdfg())
    optimized = ss.optimize(paths_spmv.to_sdfg())
    calls = {
        'hook, by position': (lambda: paths_spmv.__dict__, lambda: paths_spmv(A, x)),
        'hook, by name': (lambda: paths_spmv.__dict__, lambda: paths_spmv(x=x, A=A)),
        'ss.compile': (lambda: compiled.__dict__, lambda: compiled(A=A, x=x)),
        'ss.optimize': (lambda: optimized._program().__dict__, lambda: optimized(A, x)),  # (its CompiledProgram)
    }
    for what, (store, call) in calls.items():
        np.testing.assert_allclose(call(), want, rtol=1e-12)
        np.testing.assert_allclose(call(), want, rtol=1e-12)
        before = _done(_plans(store()))
        np.testing.assert_allclose(call(), want, rtol=1e-12)
        assert _done(_plans(store())) == before + 1, what
        assert all(isinstance(p, plan_mod.CallPlan) for p in _plans(store()))


def test_targets_bind_through_the_full_path():
    """The GPU and FPGA runtimes contribute how they lower, allocate and call (``prepare``,
    ``invoke``); their calls bind in ``CompiledProgram._full_call`` like the CPU's."""
    assert targets.FPGA.call is targets.Runtime.call and targets.CPU.call is targets.Runtime.call
    gpu = ast.parse(pathlib.Path(targets.__file__).read_text())
    cls = next(n for n in gpu.body if isinstance(n, ast.ClassDef) and n.name == 'GPU')
    call = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == 'call')
    assert 'program._full_call(' in ast.unparse(call)  # (after passing its device arrays as they are)
    assert set(targets.RUNTIMES) == {'cpu', 'gpu', 'fpga'}  # (a new target: add it above)


def _calls_built_code(tree) -> bool:
    """Whether a module reads a compiled program's function or state, or makes a binder."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ('_cfunc', '_libhandle'):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'Binder':
            return True
    return False


def test_one_module_makes_binders():
    """Only the call plans (runtime/plan.py) read a compiled program's function and state
    and make binders."""
    found = []
    for folder in ('sdfgsparse', 'frontends', 'transformations'):
        for p in sorted((ROOT / folder).rglob('*.py')):
            if _calls_built_code(ast.parse(p.read_text())):
                found.append(str(p.resolve().relative_to(ROOT.resolve())))
    assert found == ['sdfgsparse/runtime/plan.py'], found
    for path in OWN_BINDING:
        assert (ROOT / path).exists(), path


def test_distributed_programs_call_through_the_full_path(rng, monkeypatch):
    """``ss.compile(prog, distributed=comm)``: each call, after the processes agree on the
    arguments and take their rows, runs its ``CompiledProgram`` (one process here; the
    cases under mpiexec are tests/distributed/test_mpi.py)."""
    MPI = pytest.importorskip('mpi4py.MPI', reason='the [mpi] extra (mpi4py, mpich) is not installed')
    from sdfgsparse.runtime.call import CompiledProgram
    A = sp.random_array((30, 30), density=0.2, format='csr', rng=rng)
    x = rng.standard_normal(30)
    prog = ss.compile(paths_square_spmv, distributed=MPI.COMM_SELF, gather='all')
    full = []
    orig = CompiledProgram._full_call

    def counted(self, *args, **kwargs):
        full.append(self)
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(CompiledProgram, '_full_call', counted)
    for _ in range(2):
        np.testing.assert_allclose(prog(A, x), A @ x, rtol=1e-12)
    assert isinstance(prog._compiled, CompiledProgram) and full == [prog._compiled] * 2
    with pytest.raises(ss.errors.DistributedError, match='ArgumentError: .*unexpected argument y'):
        prog(A, x, y=x)
    with pytest.raises(ss.errors.DistributedError, match='ArgumentError: .*missing argument x'):
        prog(A)


@dace.program
def paths_square_spmv(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    return A @ x
