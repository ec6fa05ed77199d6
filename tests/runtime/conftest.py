"""Fixtures of the runtime tests."""
import dace
import pytest

from sdfgsparse.runtime import call as call_mod
from sdfgsparse.runtime import plan as plan_mod


@pytest.fixture
def build(tmp_path, monkeypatch):
    """A build folder of the test's own (and CMake seeds of its own): DaCe's
    ``default_build_folder`` points there for the test."""
    monkeypatch.setenv('SDFGSPARSE_CMAKE_SEEDS', str(tmp_path / 'seeds'))
    folder = tmp_path / 'build'
    with dace.config.set_temporary('default_build_folder', value=str(folder)):
        yield folder


@pytest.fixture
def plan_calls(monkeypatch):
    """Counts the warm calls the plans finished and those they handed to the full path."""
    count = {'done': 0, 'missed': 0}
    run_plans = call_mod._run_plans

    def counted(binder):
        def run(*args):
            res = binder(*args)
            count['missed' if res is plan_mod.MISS else 'done'] += 1
            return res

        run.counted = True
        return run

    def counting(plans, *args, **kwargs):  # each plan's binder counted (restored after the test)
        for ps in plans.values():
            for p in ps:
                if not getattr(p.run, 'counted', False):
                    monkeypatch.setattr(p, 'run', counted(p.run))
        return run_plans(plans, *args, **kwargs)

    monkeypatch.setattr(call_mod, '_run_plans', counting)
    return count
