"""Fixtures of the runtime tests."""
import dace
import pytest

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
    """Counts the calls a plan finished and those it handed to the full path."""
    count = {'done': 0, 'missed': 0}
    run = plan_mod.CallPlan.run

    def counting(self, args):
        res = run(self, args)
        count['missed' if res is plan_mod.MISS else 'done'] += 1
        return res

    monkeypatch.setattr(plan_mod.CallPlan, 'run', counting)
    return count
