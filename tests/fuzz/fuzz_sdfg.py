"""Fuzzing of the SDFG-file check (``sdfgsparse.scripting.sdfg_schema``): ``make fuzz``.

The project's own SDFGs (``tests/scripting/sdfg_mutants.py``: frontend, loop region,
expanded, optimised, GPU, FPGA, history) are changed in one place each: the mutation chosen
by the fuzzer's bytes (atheris), or the fuzzer's own text put at a random position. The
oracle: no mutant runs its payload (a marker file), a mutant holding a payload is refused,
and every refusal is a ``ScriptingError`` in one line. Anything else is a finding
(libFuzzer stops and writes ``crash-*``; run the script on it to replay).

Without atheris, ``python fuzz_sdfg.py --mutants N [--seed S]`` runs N seeded mutants and
prints the counts (what the closing notes quote).
"""
import json
import os
import random
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'scripting'))

FOLDER = tempfile.mkdtemp(prefix='sdfg-fuzz-')
MARKER = os.path.join(FOLDER, 'PWNED')
PATH = os.path.join(FOLDER, 'mutant.sdfg')


def _load_modules(instrument: bool):
    if instrument:
        import atheris
        with atheris.instrument_imports(include=['sdfgsparse.scripting']):
            from sdfgsparse.scripting import files
    else:
        from sdfgsparse.scripting import files
    import sdfg_mutants
    return files, sdfg_mutants


def check(files, doc, what: str, armed: bool) -> str:
    """'loaded' or 'refused'; raises AssertionError on a finding."""
    with open(PATH, 'w') as f:
        json.dump(doc, f)
    try:
        files.load_sdfg(PATH)
        outcome = 'loaded'
    except files.ScriptingError as exc:
        if '\n' in str(exc):
            raise AssertionError(f'{what}: a refusal of more than one line: {exc}')
        outcome = 'refused'
    if os.path.exists(MARKER):
        os.remove(MARKER)
        raise AssertionError(f'{what}: the payload ran')
    if armed and outcome == 'loaded':
        raise AssertionError(f'{what}: a mutant holding a payload loaded')
    return outcome


def run_seeded(count: int, seed: int) -> None:
    files, sdfg_mutants = _load_modules(False)
    docs = sdfg_mutants.corpus(FOLDER)
    rng = random.Random(seed)
    counts = {}
    for _ in range(count):
        name = rng.choice(sorted(docs))
        doc, what, armed = sdfg_mutants.mutate(docs[name], rng, MARKER)
        outcome = check(files, doc, f'{name}: {what}', armed)
        key = f'{"payload" if armed else "plain"} {outcome}'
        counts[key] = counts.get(key, 0) + 1
    print(f'{count} mutants (seed {seed}) of {len(docs)} SDFGs: ' +
          ', '.join(f'{k}: {v}' for k, v in sorted(counts.items())) + '; no payload ran')


def main() -> None:
    import atheris
    files, sdfg_mutants = _load_modules(True)
    docs = sdfg_mutants.corpus(FOLDER)
    names = sorted(docs)

    def one_input(buf: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(buf)
        name = names[fdp.ConsumeIntInRange(0, len(names) - 1)]
        rng = random.Random(fdp.ConsumeInt(8))
        if fdp.ConsumeBool():
            doc, what, armed = sdfg_mutants.mutate(docs[name], rng, MARKER)
        else:  # the fuzzer's own text at a random string position
            doc = json.loads(docs[name])
            slots, _ = sdfg_mutants.slots(doc)
            container, key = rng.choice(slots)
            container[key] = fdp.ConsumeUnicodeNoSurrogates(200)
            what, armed = f'text at {key!r}', False
        check(files, doc, f'{name}: {what}', armed)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == '__main__':
    os.environ.setdefault('DACE_cache', 'hash')
    warnings.simplefilter('ignore')
    if '--mutants' in sys.argv:
        argv = sys.argv[1:]
        count = int(argv[argv.index('--mutants') + 1])
        seed = int(argv[argv.index('--seed') + 1]) if '--seed' in argv else 0
        run_seeded(count, seed)
    else:
        main()
