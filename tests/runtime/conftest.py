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


class _Counts:
    """The calls the plans' binders finished ('done') and handed to the full path
    ('missed') since the fixture began."""

    def __init__(self):
        self.base = self._totals()

    @staticmethod
    def _totals():
        plans = list(plan_mod.PLANS)
        return {'done': sum(p.run.done for p in plans), 'missed': sum(p.run.missed for p in plans)}

    def __getitem__(self, key):
        return self._totals()[key] - self.base.get(key, 0)


@pytest.fixture
def plan_calls():
    """Counts the warm calls the plans finished and those they handed to the full path."""
    return _Counts()
