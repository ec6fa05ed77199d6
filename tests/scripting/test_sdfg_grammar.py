"""An SDFG file does not run code as it loads: every expression string and Python code
block is checked against the grammar of ``sdfgsparse.scripting.sdfg_grammar`` before DaCe
(whose ``from_json`` evaluates them with ``sympify``) sees it. A payload in each kind of
field is refused by every command (exit 2, one line naming the file and the field) and
never runs; the SDFGs DaCe, our frontends and our pipeline write still load. Nothing here
compiles."""
import copy
import json
import os
import subprocess
import sys

import dace
import pytest

from sdfgsparse.cli import main
from sdfgsparse.scripting import files, sdfg_grammar
from sdfg_mutants import fuzz_loopy, loop_region

@pytest.fixture(scope='module')
def documents():
    """The JSON of the two SDFGs the payloads go into."""
    return {'loopy': fuzz_loopy.to_sdfg().to_json(), 'loops': loop_region().to_json()}


def _find(doc, want):
    """The first dict (depth first, in order) for which ``want(dict)`` holds."""
    stack = [doc]
    while stack:
        v = stack.pop(0)
        if isinstance(v, dict):
            if want(v):
                return v
            stack[0:0] = list(v.values())
        elif isinstance(v, list):
            stack[0:0] = v
    raise LookupError('no such field in the test SDFG')


def _array(doc, name):
    return doc['attributes']['_arrays'][name]['attributes']


def _memlet(doc, key):
    return _find(doc, lambda d: d.get('type') == 'Memlet' and d['attributes'].get(key))['attributes'][key]


def _edge_attrs(doc):
    return _find(doc, lambda d: d.get('type') == 'InterstateEdge' and d['attributes'].get('assignments'))['attributes']


def _condition(doc):
    return _find(doc, lambda d: d.get('type') == 'InterstateEdge' and
                 d['attributes'].get('condition', {}).get('string_data') not in (None, '1', ''))['attributes']['condition']


def _node(doc, kind):
    return _find(doc, lambda d: d.get('type') == kind)['attributes']


def _lib_node(doc):
    return _find(doc, lambda d: isinstance(d.get('classpath'), str))


# (document, field kind, how to put the payload there, the JSON path the error names)
INJECTIONS = [
    ('loopy', 'shape', lambda d, p: _array(d, 'x')['shape'].__setitem__(0, p), '_arrays.x.attributes.shape[0]'),
    ('loopy', 'strides', lambda d, p: _array(d, 'x')['strides'].__setitem__(0, p), 'x.attributes.strides[0]'),
    ('loopy', 'offset', lambda d, p: _array(d, 'x')['offset'].__setitem__(0, p), 'x.attributes.offset[0]'),
    ('loopy', 'total_size', lambda d, p: _array(d, 'x').__setitem__('total_size', p), 'x.attributes.total_size'),
    ('loopy', 'structure member shape', lambda d, p: _array(d, 'A')['members'][1][1]['attributes']['shape']
     .__setitem__(0, p), 'A.attributes.members[1][1].attributes.shape[0]'),
    ('loopy', 'symbol name', lambda d, p: d['attributes']['symbols'].__setitem__(p, 'int32'), 'symbols'),
    ('loopy', 'symbol type', lambda d, p: d['attributes']['symbols'].__setitem__('N', p), 'symbols.N'),
    ('loopy', 'memlet subset', lambda d, p: _memlet(d, 'subset')['ranges'][0].__setitem__('start', p),
     'subset.ranges[0].start'),
    ('loopy', 'memlet volume', lambda d, p: _find(d, lambda m: m.get('type') == 'Memlet')['attributes']
     .__setitem__('num_accesses', p), 'num_accesses'),
    ('loops', 'memlet other_subset', lambda d, p: _memlet(d, 'other_subset')['ranges'][0].__setitem__('end', p),
     'other_subset.ranges[0].end'),
    ('loopy', 'interstate condition', lambda d, p: _condition(d).__setitem__('string_data', p),
     'condition.string_data'),
    ('loopy', 'interstate assignment', lambda d, p: _edge_attrs(d)['assignments'].__setitem__('i', p),
     'assignments.i'),
    ('loops', 'loop condition', lambda d, p: _node(d, 'LoopRegion')['loop_condition'].__setitem__('string_data', p),
     'loop_condition.string_data'),
    ('loops', 'loop init', lambda d, p: _node(d, 'LoopRegion')['init_statement'].__setitem__(
        'string_data', f'i = {p}'), 'init_statement.string_data'),
    ('loops', 'loop update', lambda d, p: _node(d, 'LoopRegion')['update_statement'].__setitem__(
        'string_data', f'i = {p}'), 'update_statement.string_data'),
    ('loops', 'loop variable', lambda d, p: _node(d, 'LoopRegion').__setitem__('loop_variable', p),
     'loop_variable'),
    ('loopy', 'python tasklet code', lambda d, p: _node(d, 'Tasklet')['code'].__setitem__('string_data',
                                                                                       f'__out = 1.0\n{p}'),
     'code.string_data'),
    ('loopy', 'write-conflict lambda', lambda d, p: _find(d, lambda m: m.get('type') == 'Memlet')['attributes']
     .__setitem__('wcr', f'lambda a, b: {p}'), 'wcr'),
    ('loopy', 'library node property', lambda d, p: _lib_node(d)['attributes'].__setitem__('schedule', p),
     'attributes.schedule'),
    ('loopy', 'library node classpath', lambda d, p: _lib_node(d).__setitem__('classpath', 'antigravity.Fly'),
     'classpath'),
]


def _payload(marker) -> str:
    return f"getattr(__import__('os'),'system')('touch {marker}')"


def _write(doc, tmp_path, name='evil.sdfg') -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize('which, kind, inject, field', INJECTIONS, ids=[i[1] for i in INJECTIONS])
def test_a_payload_in_every_field_kind_is_refused_and_never_runs(documents, which, kind, inject, field, tmp_path,
                                                                 capsys):
    marker = tmp_path / 'PWNED'
    doc = copy.deepcopy(documents[which])
    inject(doc, _payload(marker))
    path = _write(doc, tmp_path)
    code, out, err = _run(['xforms', 'list', path], capsys)
    assert code == 2 and out == '' and not marker.exists(), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'sdfgsparse xforms list: {path}: field $.') and field in lines[0]
    assert 'refused' in lines[0] and 'Traceback' not in err


def test_every_command_refuses_before_dace_parses(documents, tmp_path, capsys):
    marker = tmp_path / 'PWNED'
    doc = copy.deepcopy(documents['loopy'])
    _array(doc, 'x')['shape'][0] = _payload(marker)
    path = _write(doc, tmp_path)
    out_sdfg = tmp_path / 'out.sdfg'
    for argv in (['analyze', path], ['annotate', path, '--arg', 'x=1', '-o', out_sdfg],
                 ['optimize', path, '-o', out_sdfg], ['run', path], ['xforms', 'apply', path, 'MapTiling', '-o',
                                                                     out_sdfg]):
        code, _, err = _run(argv, capsys)
        assert code == 2 and 'field $.attributes._arrays.x.attributes.shape[0]' in err, (argv, err)
        assert len(err.splitlines()) == 1
    assert not marker.exists() and not out_sdfg.exists()
    gz = tmp_path / 'evil.sdfgz'  # compressed files too
    import gzip
    gz.write_bytes(gzip.compress(json.dumps(doc).encode()))
    code, _, err = _run(['xforms', 'list', gz], capsys)
    assert code == 2 and 'shape[0]' in err and not marker.exists()


def test_the_payload_does_run_in_stock_dace(documents, tmp_path):
    """The control: without the check, DaCe's own loader runs the shape payload (so the
    tests above would fail if the check were gone)."""
    marker = tmp_path / 'PWNED'
    doc = copy.deepcopy(documents['loopy'])
    _array(doc, 'x')['shape'][0] = _payload(marker)
    try:
        dace.SDFG.from_json(doc)
    except Exception:  # the loaded value is no shape; the command has run by then
        pass
    assert marker.exists()


@pytest.mark.parametrize('text, why', [
    ("__import__('os')", 'a call of __import__'),
    ('N.__class__', 'attribute .__class__'),
    ('Min("1+1", N)', 'a str constant'),
    ('[x for x in y]', 'ListComp'),
    ('lambdify(N, N)', 'a call of lambdify'),
    ('N +', 'not Python syntax'),
])
def test_expressions_outside_the_grammar(text, why):
    assert why in sdfg_grammar.check_expression(text)


@pytest.mark.parametrize('text', ['N', 'Min(N - 1, tile_i + 127) + 1', 'int_floor(N, 2) * M', 'A.pos1[i + 1]',
                                  '(not (i < T))', 'Mod(N, 4) == 0 and M >= 1', 'lambda a, b: max(a, b)', '1e-05',
                                  'a if b else c', '__return.vals', 'True'])
def test_expressions_inside_the_grammar(text):
    assert sdfg_grammar.check_expression(text) == ''


@pytest.mark.parametrize('code, ok', [
    ('__out = max(__in1, dace.float64(0))', True),
    ('__out = math.sqrt(__in1) if __in1 > 0 else 0.0', True),
    ('import os', False),
    ('def f(): pass', False),
    ('__out = open(1)', False),
    ('__out = exec(__in1)', False),
    ('with x: pass', False),
    ('__out = os.system(1)', False),
])
def test_python_code_blocks(code, ok):
    assert (sdfg_grammar.check_code(code) == '') == ok


def test_sdfgs_of_dace_our_frontend_and_pipeline_still_load(documents, tmp_path, capsys):
    """No false positives: the SDFGs the frontends write, their expansions (our lowering),
    a loop region, a transformation history with its original SDFG, a GPU-lowered SDFG."""
    from sdfgsparse.targets.cuda.lower import to_gpu
    from sdfgsparse.transformations.pipeline import optimize
    sdfgs = {name: dace.SDFG.from_json(copy.deepcopy(doc)) for name, doc in documents.items()}
    expanded = copy.deepcopy(sdfgs['loopy'])
    expanded.expand_library_nodes()
    sdfgs['expanded'] = expanded
    sdfgs['optimized'] = optimize(copy.deepcopy(sdfgs['loopy'])).sdfg
    gpu = copy.deepcopy(sdfgs['loopy'])
    to_gpu(gpu)
    sdfgs['gpu'] = gpu
    for name, sdfg in sdfgs.items():
        path = tmp_path / f'{name}.sdfg'
        sdfg.save(str(path))
        loaded = files.load_sdfg(str(path))
        assert loaded.name == sdfg.name
    code, _, err = _run(['xforms', 'apply', tmp_path / 'loopy.sdfg', 'MapTiling', '-o', tmp_path / 'hist.sdfg',
                         '--no-verify'], capsys)
    assert code == 0, err
    assert files.load_sdfg(str(tmp_path / 'hist.sdfg')).transformation_hist


def test_the_editor_backend_checks_through_the_loader(documents, tmp_path):
    """The VS Code backend imports sdfgsparse/vscode/loader.py (as a custom-transformations
    file); from then on its ``dace.SDFG.from_json`` refuses the payload, loads the rest."""
    from sdfgsparse import vscode
    marker = tmp_path / 'PWNED'
    doc = copy.deepcopy(documents['loopy'])
    _array(doc, 'x')['shape'][0] = _payload(marker)
    (tmp_path / 'evil.json').write_text(json.dumps(doc))
    (tmp_path / 'good.json').write_text(json.dumps(documents['loops']))
    script = f'''
import importlib.util, json, sys, dace
spec = importlib.util.spec_from_file_location({vscode.LOADER!r}, {vscode.LOADER!r})
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
print(dace.SDFG.from_json(json.load(open({str(tmp_path / "good.json")!r}))).name)
try:
    dace.SDFG.from_json(json.load(open({str(tmp_path / "evil.json")!r})))
except Exception as exc:
    print(type(exc).__name__, exc)
'''
    proc = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'DACE_cache': 'hash'})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == 'loops'
    assert lines[1].startswith('UnsafeSDFGError') and 'shape[0]' in lines[1]
    assert not marker.exists()


def _disguise(target: dict) -> dict:
    """``target`` made to look like a code block (the keys the old check skipped objects by)."""
    target['string_data'] = '1'
    target['language'] = 'Python'
    return target


# (document, how to put the payload there, the JSON path the error names): payloads the
# check of main 87a14ea let through (it took any object with string_data and language for
# a code block, and read a code block as Python only when its label said so)
DISGUISES = [
    ('loopy', 'root object', lambda d, p: (_disguise(d), _array(d, 'x')['shape'].__setitem__(0, p)), '$: '),
    ('loopy', 'array attributes', lambda d, p: (_disguise(_array(d, 'x')), _array(d, 'x')['shape'].__setitem__(0, p)),
     '_arrays.x.attributes'),
    ('loopy', 'memlet attributes', lambda d, p: (lambda m: (_disguise(m), m.__setitem__('volume', p)))(
        _find(d, lambda m: m.get('type') == 'Memlet')['attributes']), 'attributes.data.attributes'),
    ('loopy', 'interstate edge attributes', lambda d, p: (_disguise(_edge_attrs(d)), _edge_attrs(d)['assignments']
                                                         .__setitem__('i', p)), 'attributes.data.attributes'),
    ('loopy', 'condition labelled CPP', lambda d, p: _condition(d).update(string_data=p, language='CPP'),
     'condition.string_data'),
    ('loopy', 'condition labelled MLIR', lambda d, p: _condition(d).update(string_data=p, language='MLIR'),
     'condition.string_data'),
    ('loops', 'loop condition labelled CPP', lambda d, p: _node(d, 'LoopRegion')['loop_condition'].update(
        string_data=p, language='CPP'), 'loop_condition.string_data'),
    ('loopy', 'tasklet labelled xPython', lambda d, p: _node(d, 'Tasklet')['code'].update(
        string_data=f'__out = {p}', language='xPython'), 'code.language'),
    ('loopy', 'C++ tasklet', lambda d, p: _node(d, 'Tasklet')['code'].update(
        string_data=f'system("touch {p[-20:]}");', language='CPP'), 'code.string_data'),
    ('loopy', 'C++ global code', lambda d, p: d['attributes'].__setitem__('global_code', {'frame': {
        'string_data': '__attribute__((constructor)) static void f() { system("id"); }', 'language': 'CPP'}}),
     'global_code.frame.string_data'),
    ('loopy', 'an unknown property', lambda d, p: _array(d, 'x').__setitem__('colour', 1),
     "'colour' is not a property of Array"),
    ('loopy', 'an opaque type', lambda d, p: _array(d, 'x').__setitem__('dtype', {'type': 'opaque', 'ctype': p}),
     'x.attributes.dtype.ctype'),
]


@pytest.mark.parametrize('which, kind, inject, field', DISGUISES, ids=[i[1] for i in DISGUISES])
def test_payloads_beside_code_block_keys_and_in_any_language_are_refused(documents, which, kind, inject, field,
                                                                         tmp_path, capsys):
    marker = tmp_path / 'PWNED'
    doc = copy.deepcopy(documents[which])
    inject(doc, _payload(marker))
    path = _write(doc, tmp_path)
    for argv in (['xforms', 'list', path], ['analyze', path]):
        code, out, err = _run(argv, capsys)
        assert code == 2 and out == '' and not marker.exists(), err
        assert len(err.splitlines()) == 1 and field in err and 'refused' in err and 'Traceback' not in err, err


@pytest.mark.parametrize('code, ok', [
    ('_ty = sdfgsparse::spmv_row_chunks<4>(_tc, _tv, ss_in(_tx), _tlo, _thi, _tend);', True),
    ('sdfgsparse::team_begin<1234567890ULL>((long long)_tnnz, (long long)(1), (long long)(M), _r);', True),
    ('if (_ti >= 0) sdfgsparse::axpy_tile<double>(_ty, _ti, K, ss_in(_tb), _tj, K, _ta, _tc0, _tc1);', True),
    ('#include "sdfgsparse_storage_check.h"\n#ifndef G\n#define G\nDACE_EXPORTED int __ss_f(const int32_t* p) {\n'
     '    return sdfgsparse::check<int32_t>(p);\n}\n#endif', True),
    ('out = sqrt(a) + fmax(b, 0.5) * 2e-3;', True),
    ('system("id");', False),
    ('std::system(0);', False),
    ('f(1);', False),
    ('((void(*)(int))0x1234)(1);', False),
    ('p[0](1);', False),
    ('asm("nop");', False),
    ('#include <stdlib.h>', False),
    ('#define F system', False),
    ("char c = 'a';", False),
    ('x = 1; \\\n', False),
])
def test_cpp_code_blocks(code, ok):
    assert (sdfg_grammar.check_cpp(code) == '') == ok, sdfg_grammar.check_cpp(code)
