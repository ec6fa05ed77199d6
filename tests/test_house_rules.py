"""The rules of the house that the code itself can show (DESIGN.md, "Rules of the house").

The import graph is read from the sources (every ``import`` / ``from ... import`` of an
sdfgsparse module, at module level and inside functions), not from ``sys.modules``:

- no import circles, even if every import inside a function were moved to the top of its
  module (so no import inside a function is there to dodge a circle);
- imports run one way, down the layers: formats <- lowering <- ops <- targets <- runtime <-
  analysis <- transformations <- frontends <- the package's public API <- the faces
  (bench, scripting, vscode, the command line);
- ``ops/`` never imports ``targets/`` or ``runtime/``; ``targets/`` never imports
  ``runtime/``; ``_dace_compat`` imports nothing of ours.

A test that would pass on any tree is no test, so each check also runs on a small tree
that breaks it.
"""
import ast
import collections
import pathlib
from typing import Dict, List, Set, Tuple

import networkx as nx
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Where each package's sources live (setup.cfg's package_dir).
PACKAGES = {'sdfgsparse': ROOT / 'sdfgsparse', 'sdfgsparse.transformations': ROOT / 'transformations',
            'sdfgsparse.frontends': ROOT / 'frontends'}

#: Rank of each top-level part of the package: a module may import only parts of lower or
#: equal rank. The faces (rank 9) use the public API (rank 8.5) and each other.
RANKS = {
    '_dace_compat': 0, '_scoped': 0, '_symbolic': 0, '_warnings': 0, 'errors': 0, 'notes': 0,
    'formats': 1,
    'build': 2, 'lowering': 2,
    'ops': 3,
    'targets': 4,
    'runtime': 5,
    'analysis': 6,
    'transformations': 7,
    'frontends': 8, 'distributed': 8,
    '__init__': 8.5,
    'bench': 9, 'scripting': 9, 'vscode': 9, 'cli': 9, '__main__': 9,
}

#: Imports that break the layers today, each with its reason (to be removed, not added to).
KNOWN_EXCEPTIONS = set()

#: Modules that compile through the public API (``import sdfgsparse as ss``): the PyTorch
#: frontend builds and optimises an SDFG per graph segment from operations that use ``ss.``
#: functions, and a program per product of a layer in a catalogue layout (a face of its own).
PUBLIC_API_USERS = {'sdfgsparse.frontends.torch_graph', 'sdfgsparse.frontends.torch_sdfg',
                    'sdfgsparse.frontends.torch_ops',
                    'sdfgsparse.frontends.torch_layouts'}


def _modules(packages: Dict[str, pathlib.Path]) -> Dict[str, pathlib.Path]:
    mods = {}
    for prefix, folder in packages.items():
        for path in sorted(folder.rglob('*.py')):
            rel = path.relative_to(folder).with_suffix('')
            parts = list(rel.parts)
            if parts[-1] == '__init__':
                parts = parts[:-1]
            name = '.'.join([prefix] + parts)
            if prefix == 'sdfgsparse' and parts and parts[0] in ('transformations', 'frontends'):
                continue
            mods[name] = path
    return mods


def import_edges(packages: Dict[str, pathlib.Path]) -> Tuple[Set[Tuple[str, str]], Set[Tuple[str, str]]]:
    """(module-level edges, edges of imports inside functions) between the modules of
    ``packages``; ``from pkg import name`` is an edge to ``pkg.name`` where that is a module."""
    mods = _modules(packages)

    def known(target: str):
        while target and target not in mods:
            if '.' not in target:
                return None
            target = target.rsplit('.', 1)[0]
        return target

    top, inner = set(), set()
    for name, path in mods.items():
        is_package = path.name == '__init__.py'

        def targets(node) -> List[str]:
            if isinstance(node, ast.Import):
                return [a.name for a in node.names]
            base = name if is_package else name.rsplit('.', 1)[0]
            if node.level:
                base = '.'.join(base.split('.')[:len(base.split('.')) - (node.level - 1)])
                module = base + ('.' + node.module if node.module else '')
            else:
                module = node.module
            return [f'{module}.{a.name}' if f'{module}.{a.name}' in mods else module for a in node.names]

        def visit(node, in_function: bool):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for t in filter(None, map(known, targets(child))):
                        if t != name:
                            (inner if in_function else top).add((name, t))
                else:
                    visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(path.read_text()), False)
    return top, inner


def part(module: str) -> str:
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else '__init__'


def circles(edges) -> List[List[str]]:
    graph = nx.DiGraph(list(edges))
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def upward(edges) -> List[Tuple[str, str]]:
    """Edges that import a part of higher rank than the importer's."""
    bad = []
    for a, b in sorted(edges):
        pa, pb = part(a), part(b)
        if pa == pb or (a, b) in KNOWN_EXCEPTIONS:
            continue
        if pb == '__init__' and a in PUBLIC_API_USERS:
            continue
        if RANKS[pb] > RANKS[pa]:
            bad.append((a, b))
    return bad


def forbidden(edges) -> List[Tuple[str, str]]:
    """Edges against the named rules: ops -> targets/runtime, targets -> runtime, and
    anything of ours from _dace_compat."""
    rules = {('ops', 'targets'), ('ops', 'runtime'), ('targets', 'runtime')}
    return sorted((a, b) for a, b in edges if (a, b) not in KNOWN_EXCEPTIONS and (
        (part(a), part(b)) in rules or (part(a) == '_dace_compat' and b != a)))


@pytest.fixture(scope='module')
def edges():
    return import_edges(PACKAGES)


def test_every_part_has_a_rank(edges):
    top, inner = edges
    parts = {part(m) for e in top | inner for m in e}
    assert parts <= set(RANKS), f'parts without a rank (add them to RANKS): {sorted(parts - set(RANKS))}'


def test_no_import_circles(edges):
    top, inner = edges
    assert circles(top) == [], 'import circles at module level'
    assert circles(top | inner) == [], ('import circles through imports inside functions (an import inside a '
                                        'function is for an optional dependency, never to dodge a circle)')


def test_imports_run_down_the_layers(edges):
    top, inner = edges
    assert upward(top | inner) == []
    assert forbidden(top | inner) == []


def test_known_exceptions_are_still_needed(edges):
    top, inner = edges
    stale = KNOWN_EXCEPTIONS - (top | inner)
    assert not stale, f'remove from KNOWN_EXCEPTIONS (no longer imported): {sorted(stale)}'


def test_the_checks_catch_a_broken_tree(tmp_path):
    """A small package with a circle through a function-level import, an op that imports a
    target and a compat module that imports the runtime: every check fires."""
    pkg = tmp_path / 'sdfgsparse'
    for sub in ('ops', 'targets', 'runtime'):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / '__init__.py').write_text('')
    (pkg / '__init__.py').write_text('')
    (pkg / 'ops' / 'spmv.py').write_text('from sdfgsparse.targets import cpu\n')
    (pkg / 'targets' / 'cpu.py').write_text('def f():\n    from sdfgsparse.ops import spmv\n')
    (pkg / '_dace_compat.py').write_text('def g():\n    import sdfgsparse.runtime.call\n')
    (pkg / 'runtime' / 'call.py').write_text('')
    top, inner = import_edges({'sdfgsparse': pkg})
    assert circles(top) == []
    assert circles(top | inner) == [['sdfgsparse.ops.spmv', 'sdfgsparse.targets.cpu']]
    assert ('sdfgsparse.ops.spmv', 'sdfgsparse.targets.cpu') in upward(top)
    assert set(forbidden(top | inner)) == {('sdfgsparse.ops.spmv', 'sdfgsparse.targets.cpu'),
                                          ('sdfgsparse._dace_compat', 'sdfgsparse.runtime.call')}


def sparse_node_classes() -> Set[type]:
    """The sparse library node classes of ``sdfgsparse/ops`` (those with implementations)."""
    import sdfgsparse  # noqa: F401 (imports every node file and registers the targets)
    from sdfgsparse.ops.base import SparseLibraryNode

    def subclasses(cls):
        for c in cls.__subclasses__():
            yield c
            yield from subclasses(c)

    return {c for c in subclasses(SparseLibraryNode) if c.__module__.startswith('sdfgsparse.ops.')
            and 'implementations' in c.__dict__}


def test_cpu_implementations_are_registered_by_the_target():
    """The node files define ``pure`` only; ``targets/cpu`` adds ``cpu`` (and makes it the
    default) and ``targets/cuda`` adds ``cuda`` on every sparse node."""
    from sdfgsparse.targets.registry import registered

    nodes = sparse_node_classes()
    with_cpu = set(registered('cpu'))
    assert nodes and nodes == with_cpu
    for c in with_cpu:
        assert c.default_implementation == 'cpu' and type(c.implementations['cpu']).__name__ != 'NoneType'
        assert c.implementations['cpu'].__module__.startswith('sdfgsparse.targets.cpu.expansions.')
        assert c.implementations['pure'].__module__ == c.__module__
    counts = collections.Counter(c.__module__ for c in with_cpu)
    assert all(n == 1 for n in counts.values())
    assert set(registered('cuda')) == nodes


def without_own_validate(classes) -> List[str]:
    """Names of the ``classes`` that do not define ``validate`` themselves (an inherited one,
    DaCe's no-op ``Node.validate`` included, does not count)."""
    return sorted(c.__name__ for c in classes if 'validate' not in c.__dict__)


def test_every_sparse_node_defines_validate_in_its_own_class():
    """Every sparse node checks its own wiring: DaCe calls ``node.validate(sdfg, state)`` before
    it generates code, so a loaded or edited SDFG with a wrong connection stops there with a
    typed error naming the node and the connector (sdfgsparse/ops/validation.py)."""
    nodes = sparse_node_classes()
    assert nodes and without_own_validate(nodes) == []
    bare, own = type('Bare', (), {}), type('Own', (), {'validate': lambda self, sdfg, state: None})
    assert without_own_validate([bare, type('Heir', (own, ), {}), own]) == ['Bare', 'Heir']


#: Where kernels are built: no generated Python source is run there.
KERNEL_FOLDERS = ('ops', 'targets', 'lowering')


def _calls_of(tree, names) -> List[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in names]


def test_kernels_run_no_generated_source():
    """No ``exec``, ``eval`` or ``compile`` of text in ops/, targets/, lowering/: kernels are
    SDFGs built with the builder (DESIGN.md)."""
    found = {str(p.relative_to(ROOT)): lines for folder in KERNEL_FOLDERS
             for p in sorted((ROOT / 'sdfgsparse' / folder).rglob('*.py'))
             if (lines := _calls_of(ast.parse(p.read_text()), {'exec', 'eval', 'compile'}))}
    assert not found, found
    assert _calls_of(ast.parse('exec(compile(src, "k", "exec"))'), {'exec', 'compile'}) == [1, 1]


#: The files that run generated Python source, and why: none (the torch frontend builds its
#: segments' SDFGs node by node, frontends/torch_sdfg.py); this list stays empty.
RUNS_SOURCE = {}


def test_no_generated_source_is_run_beyond_the_known_places():
    """No ``exec``, ``eval`` or ``compile`` of text in sdfgsparse/, frontends/ or
    transformations/ but where :data:`RUNS_SOURCE` says (and each of those still does)."""
    found = {}
    for folder in ('sdfgsparse', 'frontends', 'transformations'):
        for p in sorted((ROOT / folder).rglob('*.py')):
            lines = _calls_of(ast.parse(p.read_text()), {'exec', 'eval', 'compile'})
            if lines:  # (sdfgsparse/frontends is a link to frontends/: one name per file)
                found[str(p.resolve().relative_to(ROOT.resolve()))] = lines
    assert set(found) == set(RUNS_SOURCE), found


def _cpp_literals(source: str) -> List[Tuple[int, int]]:
    """``(line, lines of C++)`` of each string literal of ``source`` (f-strings whole, not
    docstrings) that holds C++: a statement ending in ``;``, an ``#include``, a
    ``_Pragma``, a brace that opens or closes a block."""
    import re
    cpp = re.compile(r';\s*$|#include|_Pragma|\)\s*\{\s*$|^\s*\}', re.M)
    tree = ast.parse(source)
    skip = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body and \
                isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant):
            skip.add(id(n.body[0].value))
        if isinstance(n, ast.JoinedStr):
            skip.update(id(v) for v in n.values)
    found = []
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            text = n.value
        elif isinstance(n, ast.JoinedStr):
            text = ''.join(v.value if isinstance(v, ast.Constant) else '{}' for v in n.values)
        else:
            continue
        if cpp.search(text) and not text.lstrip().startswith(('u_', '__o =')):  # (Python tasklets)
            found.append((n.lineno, len([l for l in text.split('\n') if l.strip()])))
    return found


def test_cpp_in_python_strings_is_leaf_calls():
    """C++ in the kernel folders' Python strings: at most 60 lines in all, no literal
    longer than 5 lines (the rest lives in include/*.h)."""
    found = {f'{p.relative_to(ROOT)}:{line}': n for folder in KERNEL_FOLDERS
             for p in sorted((ROOT / 'sdfgsparse' / folder).rglob('*.py')) for line, n in _cpp_literals(p.read_text())}
    assert sum(found.values()) <= 60, found
    assert not {k: n for k, n in found.items() if n > 5}
    assert _cpp_literals('x = f"""\n#include <a>\nint f() {{\n  return {y};\n}}\n"""') == [(1, 4)]


def _target_branches(source: str) -> List[int]:
    """Lines of ``source`` that compare a target with a target's name (``target == 'gpu'``,
    ``self.target in ('cpu', 'gpu')``)."""
    names = {'cpu', 'gpu', 'fpga'}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left] + list(node.comparators)
            if not any('target' in (getattr(o, 'id', '') or getattr(o, 'attr', '')) for o in operands):
                continue
            consts = [o for o in operands if isinstance(o, ast.Constant)] + [
                e for o in operands if isinstance(o, (ast.Tuple, ast.Set, ast.List)) for e in o.elts
                if isinstance(e, ast.Constant)]
            if any(c.value in names for c in consts):
                found.append(node.lineno)
    return found


def test_the_call_path_has_no_target_branches():
    """What differs per target lives in its ``Runtime`` (runtime/targets.py); the call path
    (``CompiledProgram``, the @dace.program hook, the warm plans) holds no ``target ==``."""
    for name in ('call.py', 'plan.py', 'hooks.py', 'arguments.py'):
        text = (PACKAGES['sdfgsparse'] / 'runtime' / name).read_text()
        assert _target_branches(text) == [], name
    assert _target_branches("if target == 'gpu':\n    pass\nok = self.target in ('fpga', 'cpu')\n"
                            "device = v.type != 'cpu'\n") == [1, 3]
