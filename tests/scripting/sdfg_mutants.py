"""Mutants of the project's own SDFG files, for the fuzzer of the SDFG-file check
(``test_sdfg_fuzz.py`` in the test suite, ``tests/fuzz/fuzz_sdfg.py`` under atheris).

:func:`corpus` saves the SDFGs the project writes (the frontend's, a loop region, expanded
with the ``cpu`` kernels, optimised, lowered to the GPU and to the FPGA, a transformation
history, recorded examples with SparseFormatSelection applied). :func:`mutate` changes one of them in one place: a key added (with a payload or a
plain value), a key renamed, a string or any value replaced by a payload, a code block's
language changed. Every payload, if anything evaluated, imported or compiled it, would
create the file ``marker``.
"""
import copy
import json
import random
from typing import Any, Dict, List, Tuple

import dace
import numpy as np
import scipy.sparse as sp

import sdfgsparse as ss
from sdfgsparse.scripting.sdfg_schema import FREE_TEXT_PROPERTIES

N, T = dace.symbol('N'), dace.symbol('T')
M, K = dace.symbol('M'), dace.symbol('K')


@dace.program
def fuzz_loopy(A: ss.CSR[dace.float64, N, N], x: dace.float64[N], y: dace.float64[N]):
    for i in range(T):
        if i > 1:
            y[:] = A @ x
        x[1:N] = y[0:N - 1] + 1.0


@dace.program
def fuzz_fpga(A: ss.CSR[dace.float32, M, N, dace.int32], B: dace.float32[N, K], x: dace.float32[N]):
    return A @ B, A @ x


@dace.program
def fuzz_power(A: ss.CSR[dace.float64, N, N], x: dace.float64[N]):
    y = np.copy(x)
    for it in range(40):
        y = A @ y
    return y


def _selected() -> dace.SDFG:
    """A program with recorded examples (sparse_notes) and SparseFormatSelection in its history."""
    from sdfgsparse.transformations.sparse_format_selection import SparseFormatSelection
    n, offs = 300, range(-3, 4)
    A = sp.csr_array(sp.diags([np.full(n - abs(o), 0.1 * (o + 4)) for o in offs], list(offs), format='csr'))
    sdfg = fuzz_power.to_sdfg()
    ss.record_examples(sdfg, {'A': A, 'x': np.linspace(0, 1, n)})
    if sdfg.apply_transformations(SparseFormatSelection) != 1:
        raise RuntimeError('SparseFormatSelection did not apply')
    return sdfg


def loop_region() -> dace.SDFG:
    from dace.sdfg.state import LoopRegion
    sdfg = dace.SDFG('loops')
    sdfg.add_array('a', [10], dace.float64)
    sdfg.add_array('b', [10], dace.float64)
    loop = LoopRegion('loop', 'i < 10', 'i', 'i = 0', 'i = i + 1')
    sdfg.add_node(loop, is_start_block=True)
    body = loop.add_state('body', is_start_block=True)
    t = body.add_tasklet('t', {}, {'o'}, 'o = 1.0')
    body.add_edge(t, 'o', body.add_write('a'), None, dace.Memlet('a[i]'))
    body.add_nedge(body.add_read('b'), body.add_write('a'), dace.Memlet('b[0:2]', other_subset='0:2'))
    return sdfg


def corpus(folder) -> Dict[str, str]:
    """{name: JSON text} of the project's SDFGs (``folder``: where the history is made)."""
    from sdfgsparse.cli import main
    from sdfgsparse.targets.cuda.lower import to_gpu
    from sdfgsparse.targets.fpga import lower
    from sdfgsparse.transformations.pipeline import optimize
    base = fuzz_loopy.to_sdfg()
    sdfgs = {'frontend': base, 'loops': loop_region()}
    expanded = copy.deepcopy(base)
    expanded.expand_library_nodes()
    sdfgs['expanded'] = expanded
    sdfgs['optimized'] = optimize(copy.deepcopy(base)).sdfg
    gpu = copy.deepcopy(base)
    to_gpu(gpu)
    sdfgs['gpu'] = gpu
    sdfgs['fpga'] = lower.to_fpga(fuzz_fpga.to_sdfg())
    sdfgs['selected'] = _selected()
    docs = {name: json.dumps(sdfg.to_json()) for name, sdfg in sdfgs.items()}
    src, hist = f'{folder}/frontend.sdfg', f'{folder}/history.sdfg'
    base.save(src)
    if main(['xforms', 'apply', src, 'MapTiling', '-o', hist, '--no-verify']) != 0:
        raise RuntimeError('could not make the history SDFG')
    with open(hist) as f:
        docs['history'] = f.read()
    return docs


def payloads(marker: str) -> List[Any]:
    """Values that would create ``marker`` if anything ran them."""
    expr = f"getattr(__import__('os'),'system')('touch {marker}')"
    inner = json.loads(json.dumps({'type': 'SDFG', 'attributes': {'name': 'x', '_arrays': {'a': {
        'type': 'Array', 'attributes': {'shape': [expr], 'dtype': 'float64'}}}}, 'nodes': [], 'edges': []}))
    return [
        expr,
        f'__import__("os").system("touch {marker}")',
        f'i = {expr}',
        f'lambda a, b: {expr}',
        f'import os\nos.system("touch {marker}")',
        f'system("touch {marker}");',
        f'}}\n__attribute__((constructor)) void f() {{ system("touch {marker}"); }}',
        f'N + 1; {expr}',
        f'[x for x in ().__class__.__base__.__subclasses__()]',
        f'Min("{expr}", N)',
        json.dumps(inner),
        'os.system',
        'subprocess.Popen',
        {'string_data': expr, 'language': 'Python'},
        {'string_data': expr, 'language': 'CPP'},
        {'string_data': expr, 'language': 'MLIR'},
        {'string_data': expr, 'language': 'xPython'},
        {'string_data': f'system("touch {marker}");', 'language': 'CPP'},
        {'type': 'Array', 'attributes': {'shape': [expr], 'dtype': 'float64'}},
        {'type': 'Range', 'ranges': [{'start': expr, 'end': '1', 'step': '1', 'tile': '1'}]},
        {'type': 'opaque', 'ctype': f'int; system("touch {marker}")'},
        [expr],
        inner,
    ]


#: Keys a mutant adds: ones DaCe or the old check read specially, and made-up ones.
ADDED_KEYS = ['string_data', 'language', 'shape', 'condition', 'assignments', 'classpath', 'type', 'attributes',
              'code', 'wcr', 'subset', 'total_size', '_meta_x', 'sdfg', 'label', 'name', 'members', 'x']
PLAIN_VALUES = [1, 'N', None, True, [], {}, 'lambda a, b: a + b']
LANGUAGES = ['CPP', 'MLIR', 'xPython', 'NoCode', 'SystemVerilog', 'OpenCL', 'Python', 'python3', 'cpp']


def slots(doc) -> Tuple[list, list]:
    """Every (container, key) holding a value, and every dict, of ``doc``."""
    slots, dicts = [], []
    stack = [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            dicts.append(v)
            for k, x in v.items():
                slots.append((v, k))
                stack.append(x)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                slots.append((v, i))
                stack.append(x)
    return slots, dicts


def mutate(text: str, rng: random.Random, marker: str) -> Tuple[Any, str, bool]:
    """``(document, what was done, whether it holds a payload)``: ``text`` parsed and
    changed in one place chosen by ``rng`` (a payload: the marker's name is in it)."""
    doc, what = _mutate(text, rng, marker)
    if what.split()[-1] in FREE_TEXT_PROPERTIES:  # text for people, which nothing reads as code
        return doc, what, False
    return doc, what, marker in json.dumps(doc)


def _mutate(text: str, rng: random.Random, marker: str) -> Tuple[Any, str]:
    doc = json.loads(text)
    slots_, dicts = slots(doc)
    pay = payloads(marker)
    kind = rng.choice(['add', 'add', 'replace', 'replace', 'replace', 'rename', 'language'])
    if kind == 'language':
        blocks = [d for d in dicts if 'string_data' in d]
        if blocks:
            block = rng.choice(blocks)
            block['language'] = rng.choice(LANGUAGES)
            block['string_data'] = rng.choice([p for p in pay if isinstance(p, str)])
            return doc, f'language {block["language"]}'
        kind = 'replace'
    if kind == 'add':
        target = rng.choice(dicts)
        key = rng.choice(ADDED_KEYS)
        if rng.random() < 0.7:
            value = copy.deepcopy(rng.choice(pay))
        else:
            value = copy.deepcopy(rng.choice(PLAIN_VALUES))
        target[key] = value
        return doc, f'add {key}'
    if kind == 'rename':
        container, key = rng.choice([s for s in slots_ if isinstance(s[0], dict)])
        new = rng.choice([p for p in pay if isinstance(p, str)])
        container[new] = container.pop(key)
        return doc, f'rename {key}'
    strings = [s for s in slots_ if isinstance(s[0][s[1]], str)]
    container, key = rng.choice(strings if strings and rng.random() < 0.8 else slots_)
    container[key] = copy.deepcopy(rng.choice(pay))
    return doc, f'replace {key}'
