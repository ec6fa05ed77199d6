"""Fixtures of the runtime tests."""
import dace
import pytest


@pytest.fixture
def build(tmp_path, monkeypatch):
    """A build folder of the test's own (and CMake seeds of its own): DaCe's
    ``default_build_folder`` points there for the test."""
    monkeypatch.setenv('SDFGSPARSE_CMAKE_SEEDS', str(tmp_path / 'seeds'))
    folder = tmp_path / 'build'
    with dace.config.set_temporary('default_build_folder', value=str(folder)):
        yield folder
