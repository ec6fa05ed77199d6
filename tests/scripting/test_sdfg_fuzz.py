"""The SDFG-file check under mutation: the project's own SDFGs (frontend, a loop region,
expanded with the ``cpu`` kernels, optimised, GPU, FPGA, a transformation history) changed in
one place each (a key added, a key renamed, a value replaced by a payload, a code block's
language changed; ``sdfg_mutants.py``). No mutant may run its payload (a marker file), every
mutant that holds a payload is refused, every refusal is a typed error in one line, and no
command ends in a traceback. ``make fuzz`` runs the same mutants by the thousand under atheris."""
import json
import os
import random

import pytest

from sdfgsparse.cli import main
from sdfgsparse.scripting import files

import sdfg_mutants

pytestmark = pytest.mark.filterwarnings('ignore')

#: Mutants per run of the suite (the long run: ``make fuzz``).
MUTANTS = 400


@pytest.fixture(scope='module')
def documents(tmp_path_factory):
    return sdfg_mutants.corpus(str(tmp_path_factory.mktemp('corpus')))


def test_the_corpus_loads(documents, tmp_path):
    """No false positive: every SDFG of the corpus passes the check and loads."""
    assert sorted(documents) == ['expanded', 'fpga', 'frontend', 'gpu', 'history', 'loops', 'optimized', 'selected']
    for name, text in documents.items():
        path = tmp_path / f'{name}.sdfg'
        path.write_text(text)
        assert files.load_sdfg(str(path)) is not None


@pytest.mark.parametrize('seed', [0, 1])
def test_mutants_never_run_and_are_refused_with_typed_errors(documents, tmp_path, seed):
    marker = str(tmp_path / 'PWNED')
    rng = random.Random(seed)
    outcomes = {'refused': 0, 'loaded': 0}
    for i in range(MUTANTS // 2):
        name = rng.choice(sorted(documents))
        doc, what, armed = sdfg_mutants.mutate(documents[name], rng, marker)
        path = tmp_path / 'mutant.sdfg'
        path.write_text(json.dumps(doc))
        try:
            files.load_sdfg(str(path))
            outcome = 'loaded'
        except files.ScriptingError as exc:
            outcome = 'refused'
            message = str(exc)
            assert '\n' not in message and message.startswith(str(path)), (name, what, message)
        assert not os.path.exists(marker), (name, what)
        assert not (armed and outcome == 'loaded'), (name, what)
        outcomes[outcome] += 1
    assert outcomes['refused'] > MUTANTS // 4


def test_commands_on_mutants_end_in_one_line(documents, tmp_path, capsys):
    """The commands that read SDFG files (xforms list, analyze) on mutants: an exit status
    and at most a line and a hint, never a traceback, never the payload run."""
    marker = str(tmp_path / 'PWNED')
    rng = random.Random(7)
    for i in range(24):
        name = rng.choice(['frontend', 'loops', 'history'])
        doc, what, armed = sdfg_mutants.mutate(documents[name], rng, marker)
        path = tmp_path / 'mutant.sdfg'
        path.write_text(json.dumps(doc))
        for argv in (['xforms', 'list', str(path)], ['analyze', str(path)]):
            code = main(argv)
            err = capsys.readouterr().err
            assert code in (0, 1, 2) and 'Traceback' not in err, (name, what, argv, err)
            assert len([line for line in err.splitlines() if not line.startswith('hint:')]) <= 1, err
            assert not (armed and code != 2), (name, what, argv, err)
        assert not os.path.exists(marker), (name, what)
