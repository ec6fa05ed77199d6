"""Each fix of :mod:`sdfgsparse._dace_compat` against stock DaCe 1.0.2: the bug shown on
DaCe's own function (the wrapper's ``__wrapped__``), and gone with the fix.

Fixes whose bug needs a build, another process or many threads to show are proven where
that already happens (named in :data:`ELSEWHERE`); the last test checks that every fix is
covered one way or the other.
"""
import inspect
import re

import dace
import numpy as np
from dace.codegen import compiled_sdfg

import sdfgsparse as ss
from sdfgsparse import _dace_compat

#: Fixes shown by tests elsewhere (their bug needs a build, a second process or threads).
ELSEWHERE = {
    10: 'tests/runtime/test_cmake_seed.py::test_a_second_process_reuses_the_build_folder',
    15: 'tests/runtime/test_caller_state.py::test_intermediate_sparse_results_are_freed',
    17: 'tests/frontends/test_parse_renames.py::test_batched_renames_make_the_same_sdfg',
    20: 'tests/transformations/test_sparse_multi_pumping.py (the pumped designs deadlock without it)',
}
SHOWN_HERE = set()


def shows(number):
    def mark(f):
        SHOWN_HERE.add(number)
        return f

    return mark


def stock(function):
    """DaCe's own function under every sdfgsparse wrapper."""
    return inspect.unwrap(function)


def _csr_sdfg(name='prog'):
    sdfg = dace.SDFG(name)
    st = ss.CSR[dace.float64, dace.symbol('M'), dace.symbol('N')]
    sdfg.add_datadesc('A', st)
    return sdfg, st


@shows(2)
def test_tuple_results_in_their_order():

    class Returned:  # what DaCe's compiled program holds after a call returning 11 values
        names = sorted(f'__return_{i}' for i in range(11))  # DaCe orders them as strings
        _retarray_shapes = [(n, None, None, None, None) for n in names]
        _return_arrays = [np.array([int(n[len('__return_'):])]) for n in names]
        _retarray_is_scalar = [False] * 11

    theirs = stock(compiled_sdfg.CompiledSDFG._convert_return_values)(Returned())
    ours = compiled_sdfg.CompiledSDFG._convert_return_values(Returned())
    assert [int(r[0]) for r in theirs] == [0, 1, 10, 2, 3, 4, 5, 6, 7, 8, 9]
    assert [int(r[0]) for r in ours] == list(range(11))


@shows(3)
def test_renaming_a_structure_renames_its_members():
    for replace, renamed in ((stock(dace.SDFG.replace_dict), False), (dace.SDFG.replace_dict, True)):
        sdfg, st = _csr_sdfg()
        state = sdfg.add_state()
        r = state.add_read('A')
        v = state.add_access('A.vals')
        sdfg.add_array('out', [1], dace.float64)
        w = state.add_write('out')
        state.add_edge(r, None, v, None, dace.Memlet('A.vals[0:1]'))
        state.add_edge(v, None, w, None, dace.Memlet('A.vals[0]'))
        replace(sdfg, {'A': 'B'})
        names = {e.data.data for e in state.edges()}
        assert ('B.vals' in names) is renamed and ('A.vals' in names) is not renamed


@shows(4)
def test_structure_from_json_keeps_symbolic_members():
    _, st = _csr_sdfg()
    text = st.to_json()
    for from_json, symbolic in ((dace.data.Structure.from_json.__wrapped__, False),
                                (dace.data.Structure.from_json, True)):
        back = from_json(text)
        strings = [k for k, v in back.members.items() if isinstance(v, str)]
        assert (not strings) is symbolic, strings


@shows(12)
def test_nested_symbols_take_the_parent_width():
    for add, width in ((stock(dace.SDFGState.add_nested_sdfg), dace.int32),
                       (dace.SDFGState.add_nested_sdfg, dace.int64)):
        parent = dace.SDFG('parent')
        parent.add_symbol('N', dace.int64)
        inner = dace.SDFG('inner')
        inner.add_symbol('N', dace.int32)
        inner.add_state()
        state = parent.add_state()
        node = add(state, inner, parent, set(), set(), symbol_mapping={'N': 'N'})
        assert node.sdfg.symbols['N'] == width


@shows(18)
def test_debug_information_is_the_callers_line():
    from dace.sdfg import state as state_module

    def add_node(get):  # as SDFGState.add_* call it: the caller of add_* is two frames up
        return get()

    def caller(get):
        return add_node(get)  # the line recorded

    line = caller.__code__.co_firstlineno + 1
    ours, theirs = caller(state_module._getdebuginfo), caller(state_module._getdebuginfo.__wrapped__)
    assert (theirs.start_line, theirs.filename) == (line, __file__)
    assert (ours.start_line, ours.end_line, ours.filename) == (theirs.start_line, theirs.end_line, theirs.filename)


@shows(19)
def test_free_symbols_answer_only_for_the_same_object():
    from dace.codegen.targets.framecode import DaCeCodeGenerator

    class Gen:
        fsyms = {}

    class Obj:
        free_symbols = {'K'}

    obj = Obj()
    gen = Gen()
    gen.fsyms = {id(obj): {'stale'}}  # the entry of a freed object that had the same address
    assert DaCeCodeGenerator.free_symbols.__wrapped__(gen, obj) == {'stale'}
    gen.fsyms = {id(obj): {'stale'}}
    assert DaCeCodeGenerator.free_symbols(gen, obj) == {'K'}


@shows(20)
def test_two_equal_streams_of_one_processing_element():
    from dace.codegen.targets import fpga
    sdfg = dace.SDFG('streams')
    for name in ('xv_s', 'vb_s'):
        sdfg.add_stream(name, dace.float32, buffer_size=4, transient=True)
    state = sdfg.add_state()
    t = state.add_tasklet('pe', {'a'}, {'b'}, 'b = a')
    x = state.add_read('xv_s')
    y = state.add_write('vb_s')
    state.add_edge(x, None, t, 'a', dace.Memlet('xv_s[0]'))
    state.add_edge(t, 'b', y, None, dace.Memlet('vb_s[0]'))
    assert sdfg.arrays['xv_s'] == sdfg.arrays['vb_s']  # structurally equal descriptors
    # each stream has one end in the element: both leave it (kernel ports, not local FIFOs)
    assert not fpga.is_external_stream.__wrapped__(x, state)  # stock: the other stream "is" its other end
    assert fpga.is_external_stream(x, state) and fpga.is_external_stream(y, state)


@shows(22)
def test_nesting_a_sparse_program_is_refused():
    from dace.transformation.interstate import NestSDFG
    sdfg, _ = _csr_sdfg('nest')
    sdfg.add_state()
    assert NestSDFG.can_be_applied.__wrapped__(NestSDFG(), sdfg, 0, sdfg)
    assert not NestSDFG.can_be_applied(NestSDFG(), sdfg, 0, sdfg)


def test_every_fix_is_shown():
    doc = _dace_compat.__doc__
    numbers = {int(m) for m in re.findall(r'^(\d+)\. ', doc, re.M)}
    assert numbers, 'no numbered fixes in the module docstring'
    assert numbers == SHOWN_HERE | set(ELSEWHERE), (sorted(numbers - SHOWN_HERE - set(ELSEWHERE)),
                                                      sorted((SHOWN_HERE | set(ELSEWHERE)) - numbers))
    for number, where in ELSEWHERE.items():
        path = where.split('::')[0].split(' ')[0]
        text = open(path).read() if not path.startswith('/') else ''
        if '::' in where:
            assert f'def {where.split("::")[1]}(' in text, where


def test_every_dace_attribute_is_replaced_through_wrap():
    """Each replaced attribute keeps DaCe's own under it and is listed once per wrapper."""
    entries = _dace_compat.wrapped()
    assert len(entries) == len({(id(o), n, k) for o, n, k in entries}) >= 20
    for owner, name, key in entries:
        current = inspect.getattr_static(owner, name)
        func = current.__func__ if isinstance(current, (staticmethod, classmethod)) else \
            current.fget if isinstance(current, property) else current
        chain = []
        while func is not None:
            chain.append(getattr(func, '_sdfgsparse', None))
            func = getattr(func, '__wrapped__', None)
        assert key in chain, (owner, name, key)
        assert chain[-1] is None  # DaCe's own at the bottom


def test_wrap_is_once_per_key():
    class Owner:
        def f(self):
            return 1

    made = []

    def make(orig):
        made.append(orig)
        return lambda self: orig(self) + 1

    assert _dace_compat.wrap(Owner, 'f', make, key='test.once') is not None
    assert _dace_compat.wrap(Owner, 'f', make, key='test.once') is None
    assert Owner().f() == 2 and len(made) == 1 and inspect.unwrap(Owner.f)(Owner()) == 1


def test_another_dace_version_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(_dace_compat, '_applied', {'done': False})
    monkeypatch.setattr(dace, '__version__', '1.0.3')
    before = len(_dace_compat.wrapped())
    with __import__('pytest').warns(RuntimeWarning, match='fixes of DaCe bugs are for DaCe 1.0.2'):
        _dace_compat.apply()
    assert len(_dace_compat.wrapped()) == before
