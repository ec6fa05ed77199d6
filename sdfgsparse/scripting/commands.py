"""The SDFG sub-commands of ``sdfgsparse``: scripting on saved SDFG files, no Python needed.

    sdfgsparse xforms list FILE.sdfg [--all]                    transformations that match, where
    sdfgsparse xforms apply FILE.sdfg NAME [...] -o OUT.sdfg    apply one (or every) match
    sdfgsparse optimize FILE.sdfg [--matrices DIR] -o OUT.sdfg  ss.optimize on the file
    sdfgsparse annotate FILE.sdfg --matrices DIR -o OUT.sdfg    record example sizes and statistics
    sdfgsparse run FILE.sdfg --arg NAME=PATH ... [-o OUT]       compile and run on argument files

:func:`add_parsers` adds them to the ``sdfgsparse`` parser (``sdfgsparse/cli.py``). Each
handler returns the exit status: 0 done, 1 nothing applied or a failed check (no match,
an SDFG that does not validate or compile), 2 a usage or input error (a missing or
unreadable file, an unknown name, arguments of the wrong shape). Input errors print one
line ``sdfgsparse <command>: <what is wrong>`` (and, where it helps, ``hint: ...``) to
stderr, never a traceback. Argument and result files: :mod:`sdfgsparse.scripting.files`.
"""
import argparse
import copy
import functools
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

from sdfgsparse import errors
from sdfgsparse.analysis.user_symbols import user_symbol_names
from sdfgsparse.scripting import files, verify
from sdfgsparse.scripting.files import ScriptingError

__all__ = ['add_parsers', 'quiet_dace', 'xforms_list', 'xforms_apply', 'optimize', 'annotate',
           'run']

#: ``xforms apply --every`` stops after this many applications (a rewrite that keeps matching its own output).
EVERY_LIMIT = 100


def quiet_dace():
    """A context in which DaCe's known-benign warnings are not shown, every other warning is
    (:func:`sdfgsparse._warnings.benign_dace_warnings`)."""
    from sdfgsparse._warnings import benign_dace_warnings
    return benign_dace_warnings()


class _Failed(Exception):
    """A command ends with ``code`` and this message (a hint on the next line)."""

    def __init__(self, message: str, code: int = 1, hint: Optional[str] = None):
        super().__init__(message)
        self.code = code
        self.hint = hint


def _report(command: str, message: str, hint: Optional[str] = None) -> None:
    print(f'sdfgsparse {command}: {message}', file=sys.stderr)
    if hint:
        print(f'hint: {hint}', file=sys.stderr)


def unexpected(command: str, exc: BaseException) -> int:
    """Report an error that is not an input error in one line (exit 1); with
    ``SDFGSPARSE_TRACEBACK=1`` in the environment it is raised with its traceback."""
    if os.environ.get('SDFGSPARSE_TRACEBACK'):
        raise exc
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''
    _report(command, f'failed: {type(exc).__name__}{": " + first if first else ""}',
            'the SDFG may be damaged; SDFGSPARSE_TRACEBACK=1 shows where it failed')
    return 1


def _command(name: str):
    """Run a handler under :func:`quiet_dace`, turning input errors into one line and exit 2."""

    def wrap(fn):

        @functools.wraps(fn)
        def handler(args) -> int:
            try:
                with quiet_dace():
                    return fn(args)
            except _Failed as exc:
                _report(name, str(exc), exc.hint)
                return exc.code
            except errors.SparseError as exc:  # ScriptingError and every sdfgsparse input error
                _report(name, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                        getattr(exc, 'hint', None))
                return 2
            except Exception as exc:  # DaCe failing on an SDFG it loaded: one line, not a traceback
                return unexpected(name, exc)

        return handler

    return wrap


# ---------------------------------------------------------------------------------------------
# xforms


def _transformation_classes():
    """``({name: PatternTransformation class}, {names of SubgraphTransformations})``, with
    sdfgsparse's (CATEGORY 'Sparse') registered."""
    import sdfgsparse.transformations  # noqa: F401  (registers the Sparse transformations)
    from dace.transformation.transformation import PatternTransformation, SubgraphTransformation
    classes = {}
    for cls in sorted(PatternTransformation.subclasses_recursive(), key=lambda c: (c.__module__, c.__name__)):
        classes.setdefault(cls.__name__, cls)
    return classes, {c.__name__ for c in SubgraphTransformation.subclasses_recursive()}


def _category(cls) -> str:
    return str(getattr(cls, 'CATEGORY', '') or '-')


class _Match:
    """A pattern match with where it is, as text (what ``--where`` searches)."""

    def __init__(self, xform, root):
        self.xform = xform
        self.name = type(xform).__name__
        self.category = _category(type(xform))
        cfg = root.cfg_list[xform.cfg_id]
        if xform.state_id == -1:
            graph, place = cfg, f'cfg {xform.cfg_id} ({cfg.label})'
        else:
            graph = cfg.node(xform.state_id)
            place = f'cfg {xform.cfg_id} state {xform.state_id} ({graph.label})'
        try:
            nodes = xform.match_to_str(graph)
        except Exception:  # a transformation's own match_to_str failing must not hide the match
            nodes = str(sorted(xform._subgraph.values()))
        self.where = f'{place}: {nodes}'
        self.key = (self.category != 'Sparse', self.name, xform.cfg_id, xform.state_id,
                    tuple(sorted(xform._subgraph.items())))


def _matches(sdfg, patterns, options=None, where: Optional[str] = None) -> List[_Match]:
    from dace.transformation.passes.pattern_matching import match_patterns
    found = [_Match(x, sdfg) for x in match_patterns(sdfg, patterns, options=options)]
    if where is not None:
        found = [m for m in found if where in m.where]
    return sorted(found, key=lambda m: m.key)


def _output_of(args, command: str) -> str:
    """Where a command that changes an SDFG saves it: ``-o`` or, with ``--in-place``, FILE."""
    if args.output and args.in_place:
        raise _Failed('give -o OUT or --in-place, not both', code=2)
    if not args.output and not args.in_place:
        raise _Failed(f'where to save the result? give -o OUT.sdfg (or --in-place to overwrite {args.sdfg})', code=2,
                      hint=f'sdfgsparse {command} {args.sdfg} ... -o out.sdfg')
    out = args.output or args.sdfg
    files.check_output(out, '-o' if args.output else '--in-place')  # before any work
    return out


@_command('xforms list')
def xforms_list(args) -> int:
    """``xforms list``: the pattern matches of every registered transformation."""
    sdfg = files.load_sdfg(args.sdfg)
    classes, _ = _transformation_classes()
    matches = _matches(sdfg, list(classes.values()))
    shown = matches if args.all else [m for m in matches if m.category == 'Sparse']
    others = [m for m in matches if m not in shown]
    if shown:
        width = max(len('transformation'), *(len(m.name) for m in shown))
        cwidth = max(len('category'), *(len(m.category) for m in shown))
        print(f'{"#":>3}  {"transformation":<{width}}  {"category":<{cwidth}}  where')
        index: Dict[str, int] = {}
        for m in shown:
            i = index[m.name] = index.get(m.name, -1) + 1
            print(f'{i:>3}  {m.name:<{width}}  {m.category:<{cwidth}}  {m.where}')
    kinds = 'transformation' if args.all else 'Sparse transformation'
    summary = f'{sdfg.name}: {_count(len(shown), "match")} of {_count(len({m.name for m in shown}), kinds)}'
    if others:
        kinds = _count(len({m.name for m in others}), 'other transformation')
        summary += f"; {_count(len(others), 'match')} of {kinds} (DaCe's; --all lists them)"
    print(summary)
    if shown:
        print('(# is the --index of `sdfgsparse xforms apply FILE NAME`)')
    return 0


def _count(n: int, noun: str) -> str:
    return f'{n} {noun}' + ('' if n == 1 else 'es' if noun.endswith('ch') else 's')


def _parse_options(cls, settings: Sequence[str]) -> Dict[str, Any]:
    """``--set PROP=VALUE`` -> ``{PROP: value}`` (JSON when it parses, else the string),
    each checked by setting it on an instance of ``cls``."""
    debug = {'cfg_id', 'state_id', '_subgraph', 'expr_index'}
    props = sorted(p for p in getattr(cls, '__properties__', {}) if p not in debug)
    out = {}
    for text in settings or ():
        name, raw = files.split_assignment(text, '--set')
        if name not in props:
            close = files.close_names(name, props)
            raise _Failed(f'--set {name}: {cls.__name__} has no property {name} '
                          f'(properties: {", ".join(props) or "none"})', code=2,
                          hint=f'did you mean {" or ".join(close)}?' if close else None)
        value = files.parse_json_value(raw)
        probe = cls()
        try:
            setattr(probe, name, value)
        except Exception as exc:  # DaCe's property setters raise TypeError, ValueError, ...
            try:  # a JSON number for a string property, e.g. --set label=1
                setattr(probe, name, raw)
                value = raw
            except Exception:
                raise _Failed(f'--set {name}={raw}: not a value of {cls.__name__}.{name} ({exc})', code=2) from None
        out[name] = value
    return out


@_command('xforms apply')
def xforms_apply(args) -> int:
    """``xforms apply``: apply a match (or ``--every`` match) of one transformation."""
    if args.every and args.index is not None:
        raise _Failed('give --index or --every, not both', code=2)
    if args.index is not None and args.index < 0:
        raise _Failed(f'--index {args.index}: expected 0 or more', code=2)
    out = _output_of(args, 'xforms apply')
    classes, subgraph_xforms = _transformation_classes()
    cls = classes.get(args.name)
    if cls is None:
        if args.name in subgraph_xforms:
            raise _Failed(f'{args.name} is a subgraph transformation: it applies to a selected subgraph, which this '
                          'command has no way to name', code=2,
                          hint='apply it in Python: XF().apply_to(sdfg, subgraph)')
        close = files.close_names(args.name, list(classes))
        suggest = f'; did you mean {", ".join(close)}?' if close else ''
        raise _Failed(f'unknown transformation {args.name!r}{suggest}', code=2,
                      hint='`sdfgsparse xforms list FILE.sdfg --all` lists those that match')
    options = _parse_options(cls, args.set)
    sdfg = files.load_sdfg(args.sdfg)
    original = None if args.no_verify else copy.deepcopy(sdfg)
    opts = [options] if options else None
    found = _matches(sdfg, [cls], opts, args.where)
    if not found:
        total = len(_matches(sdfg, [cls], opts)) if args.where is not None else 0
        why = f' ({total} without --where {args.where!r})' if total else ''
        raise _Failed(f'{args.name} matches nowhere in {args.sdfg}{why}; nothing applied', code=1,
                      hint='`sdfgsparse xforms list FILE.sdfg --all` lists what matches')
    if args.index is not None and args.index >= len(found):
        raise _Failed(f'--index {args.index}: {args.name} has {len(found)} match{"es" if len(found) > 1 else ""}'
                      + (f' containing {args.where!r}' if args.where is not None else '') +
                      f' (--index 0 to {len(found) - 1})', code=2)
    first = found[args.index or 0]
    applied = [_apply(first, args.name)]
    if args.every:
        while True:
            again = _matches(sdfg, [cls], opts, args.where)
            if not again:
                break
            if len(applied) < EVERY_LIMIT:
                applied.append(_apply(again[0], args.name))
                continue
            raise _Failed(f'stopped after {EVERY_LIMIT} applications: {args.name} keeps matching its own result '
                          '(it would rewrite without end); nothing saved', code=1,
                          hint='apply it one match at a time (without --every), or only where it belongs (--where)')
    for where in applied:
        print(f'applied {args.name} at {where}')
    if not args.every and args.index is None and len(found) > 1:
        print(f'({len(found) - 1} other match{"es" if len(found) > 2 else ""} left: --index I picks one, '
              '--every applies all)')
    _validate(sdfg, f'after {args.name}')
    if original is not None:
        _verify(original, sdfg, args.name)
    files.save_sdfg(sdfg, out)
    print(f'saved {out}')
    return 0


def _verify(before, after, name: str) -> None:
    """Run the SDFG before and after on random inputs (:mod:`.verify`); a difference or
    an SDFG that cannot be run is a failure (exit 1, nothing saved)."""
    try:
        compared = verify.verify_transformation(before, after, name)
    except verify.VerificationError as exc:
        raise _Failed(f'{exc}; nothing saved', code=1,
                      hint='--no-verify saves it without this check') from None
    print(f'verified: {_count(compared, "output")} {"agrees" if compared == 1 else "agree"} before and after '
          f'{name} on two sets of random inputs')


def _apply(match: _Match, name: str) -> str:
    try:
        match.xform.apply_pattern(append=True)
    except Exception as exc:  # the transformation's own failure: one line, nothing saved
        text = str(exc).strip().splitlines()  # DaCe's messages can span lines: the first one
        first = text[0].rstrip(':') if text else ''
        raise _Failed(f'{name} failed at {match.where}: {type(exc).__name__}: {first}; nothing saved', code=1) from None
    return match.where


def _validate(sdfg, when: str) -> None:
    from dace.sdfg.validation import InvalidSDFGError
    try:
        sdfg.validate()
    except InvalidSDFGError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else 'invalid'
        raise _Failed(f'the SDFG does not validate {when}: {first}; nothing saved', code=1) from None


# ---------------------------------------------------------------------------------------------
# optimize, annotate


def _examples(sdfg, args, required: bool) -> Dict[str, Any]:
    """Example arguments from ``--matrices DIR`` and ``--arg NAME=PATH`` (the latter wins)."""
    paths: Dict[str, str] = {}
    if args.matrices is not None:
        paths, ignored = files.folder_arguments(sdfg, args.matrices)
        if not paths:
            names = files.argument_names(sdfg)
            n = names[0] if names else 'A'
            found = f'; it holds {", ".join(ignored[:3])}{", ..." if len(ignored) > 3 else ""}' if ignored else ''
            raise ScriptingError(f'--matrices {args.matrices}: no file is named after an argument of {sdfg.name} '
                                 f'(arguments: {", ".join(names)}{found})',
                                 hint=f'name each file after its argument ({n}.mtx, {n}.mtx.gz or {n}.npy), '
                                 'or use --arg')
        for base in ignored:
            print(f'ignored {os.path.join(args.matrices, base)}: {sdfg.name} has no argument '
                  f'{files.stem(base)}', file=sys.stderr)
    paths.update(_assignments(args.arg, '--arg'))
    if required and not paths:
        raise _Failed('give example arguments: --matrices DIR or --arg NAME=PATH', code=2)
    return files.read_arguments(sdfg, paths)


def _assignments(texts: Optional[Sequence[str]], option: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for text in texts or ():
        name, value = files.split_assignment(text, option)
        if name in out:
            raise ScriptingError(f'{option} {name} given twice ({out[name]}, {value})')
        out[name] = value
    return out


@_command('optimize')
def optimize(args) -> int:
    """``optimize``: ``ss.optimize`` on an SDFG file, with example arguments from files."""
    out = _output_of(args, 'optimize')
    sdfg = files.load_sdfg(args.sdfg)
    examples = _examples(sdfg, args, required=False)
    from sdfgsparse.transformations.pipeline import optimize as _optimize
    result = _optimize(sdfg, target=args.target, matrices=examples or None)
    print(result.report())
    for name, fmt in result.conversions.items():
        print(f'note: {name} is now taken as {fmt} (`sdfgsparse run` converts .mtx files to it)')
    # the SDFG that is built: for the FPGA its lowering (kernel states, FPGA twins of the
    # arguments), which the editor shows as the design; the same SDFG otherwise
    files.save_sdfg(result.lowered, out)
    print(f'saved {out}' + (' (lowered for the FPGA)' if args.target == 'fpga' else ''))
    return 0


@_command('annotate')
def annotate(args) -> int:
    """``annotate``: record the sizes and structure statistics of example arguments."""
    out = _output_of(args, 'annotate')
    sdfg = files.load_sdfg(args.sdfg)
    examples = _examples(sdfg, args, required=True)
    from sdfgsparse.transformations.examples import record_examples
    record = record_examples(sdfg, examples)
    shown = user_symbol_names(sdfg)  # nnz(A), not the format layer's symbol name
    sizes = ', '.join(f'{shown.get(k, k)}={v}' for k, v in sorted((record.get('sizes') or {}).items()))
    print(f'{sdfg.name}: recorded sizes {sizes or "(none)"}')
    for name, stats in sorted((record.get('stats') or {}).items()):
        given = (record.get('given') or {}).get(name, '?')
        nnz = stats.get('nnz')
        print(f'  {name}: {given}' + (f', nnz {int(nnz)}' if nnz is not None else '') +
              f', {len(stats)} structure statistics')
    files.save_sdfg(sdfg, out)
    print(f'saved {out}')
    return 0


# ---------------------------------------------------------------------------------------------
# run


def _symbols(texts: Optional[Sequence[str]]) -> Dict[str, int]:
    out = {}
    for name, value in _assignments(texts, '--symbol').items():
        try:
            out[name] = int(value)
        except ValueError:
            raise ScriptingError(f'--symbol {name}={value}: expected an integer') from None
    return out


def _undetermined(sdfg, bound: Dict[str, int], given: Dict[str, int]) -> List[str]:
    from sdfgsparse.runtime.capacity import PREFIX  # capacities: filled in by the call itself
    return sorted(s for s in map(str, sdfg.free_symbols) if s not in bound and s not in given
                  and not s.startswith(PREFIX))


def _print_result(label: str, value) -> None:
    import numpy as np
    import scipy.sparse as sp
    from sdfgsparse.runtime.container import SparseMatrix
    print(f'{label}: {files.summary(value)}')
    if not (sp.issparse(value) or isinstance(value, SparseMatrix)):
        with np.printoptions(threshold=1000, edgeitems=3):
            print(np.asarray(value))


@_command('run')
def run(args) -> int:
    """``run``: compile the SDFG and call it with arguments read from files."""
    from sdfgsparse.formats import is_sparse_desc
    from sdfgsparse.runtime.arguments import written_arguments
    from sdfgsparse.runtime.call import CompiledProgram
    from sdfgsparse.transformations.examples import bind_sizes
    sdfg = files.load_sdfg(args.sdfg)
    from sdfgsparse.targets.cuda.lower import is_lowered
    from sdfgsparse.targets.fpga.lower import fpga_storage
    if is_lowered(sdfg):
        raise _Failed(f'{args.sdfg} is lowered for the GPU; `sdfgsparse run` runs CPU SDFGs (its arguments are host '
                      'files)', code=2, hint='optimize for --target cpu to run it here')
    if fpga_storage(sdfg):
        raise _Failed(f'{args.sdfg} is lowered for the FPGA (it holds FPGA memory); `sdfgsparse run` runs CPU SDFGs',
                      code=2, hint='run the program through ss.optimize(prog, target="fpga") (C-simulated), or '
                      'optimize for --target cpu to run it here')
    given = _assignments(args.arg, '--arg')
    symbols = _symbols(args.symbol)
    names = files.argument_names(sdfg)
    missing = [n for n in names if n not in given]
    unknown = [n for n in given if n not in names]
    if unknown:
        files.read_arguments(sdfg, {unknown[0]: given[unknown[0]]})  # raises, naming the closest argument
    if missing:
        what = '; '.join(f'{n}: {files.describe(sdfg.arrays[n])}' for n in missing)
        raise ScriptingError(f'missing argument{"s" if len(missing) > 1 else ""} {", ".join(missing)} ({what})',
                             hint=' '.join(f'--arg {n}=...' for n in missing))
    results = files.result_names(sdfg)
    outputs = results or sorted(written_arguments(sdfg))
    labels = (['result'] if len(results) == 1 else [f'result_{i}' for i in range(len(results))]) if results \
        else outputs
    paths = None
    if args.output:
        if not outputs:
            raise _Failed(f'-o {args.output}: {sdfg.name} returns nothing and writes no argument', code=2)
        paths = files.result_paths(args.output, labels, [is_sparse_desc(sdfg.arrays[n]) for n in outputs])
        for path in paths:  # the argument files stay as they are
            same = [n for n, t in given.items() if os.path.isfile(t) and os.path.exists(path)
                    and os.path.samefile(t, path)]
            if same:
                raise ScriptingError(f'-o {args.output}: would overwrite {path}, the file of argument {same[0]}',
                                     hint='write the result to another file')
    values = files.read_arguments(sdfg, given)
    bound = bind_sizes(sdfg, values)  # the call's own checks, before anything compiles
    for name, value in symbols.items():
        if name in bound and bound[name] != value:
            raise ScriptingError(f'--symbol {name}={value}: the arguments fix {name} = {bound[name]}')
        if name not in set(map(str, sdfg.free_symbols)) | set(sdfg.symbols):
            raise ScriptingError(f'--symbol {name}: {sdfg.name} has no symbol {name}')
    left = _undetermined(sdfg, bound, symbols)
    if left:
        raise ScriptingError(f'symbol{"s" if len(left) > 1 else ""} {", ".join(left)}: not fixed by the arguments',
                             hint=' '.join(f'--symbol {s}=VALUE' for s in left))
    from dace.codegen.exceptions import CompilationError
    program = CompiledProgram(sdfg)
    try:
        program.build()
    except CompilationError as exc:  # CMake or the compiler failed
        text = str(exc).strip().splitlines()
        raise _Failed(f'{args.sdfg} does not compile: {type(exc).__name__}: {text[0] if text else ""}', code=1,
                      hint='the build folder (.dacecache) holds the generated code and the compiler output') from None
    result = program(**values, **{k: v for k, v in symbols.items() if k not in bound})
    if results:
        got = list(result) if isinstance(result, tuple) else [result]
    else:
        got = [values[n] for n in outputs]
    if paths is None:
        if not got:
            print(f'{sdfg.name}: returns nothing and writes no argument')
        for label, value in zip(labels, got):
            _print_result(label, value)
        return 0
    for label, value, path in zip(labels, got, paths):
        files.write_result(value, path)
        print(f'{label}: {files.summary(value)} -> {path}')
    return 0


# ---------------------------------------------------------------------------------------------
# the parsers


def _parser(sub, name: str, help: str, description: str, epilog: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=description, epilog='examples:\n' + epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _save_options(p) -> None:
    p.add_argument('-o', '--output', metavar='OUT.sdfg', default=None, help='where to save the SDFG (.sdfg, '
                   'or .sdfgz compressed)')
    p.add_argument('--in-place', action='store_true', help='overwrite FILE instead (one of -o and --in-place is '
                   'needed)')


def _example_options(p) -> None:
    p.add_argument('--matrices', metavar='DIR', default=None,
                   help='folder of example arguments: a file whose name without .mtx / .mtx.gz / .npy is an '
                   'argument name (A.mtx.gz, X.npy) is that argument; other files are ignored')
    p.add_argument('--arg', action='append', metavar='NAME=PATH', default=[],
                   help='the example of one argument (repeat for more; replaces a file of --matrices)')


def add_parsers(subparsers) -> None:
    """Add ``xforms`` (``list``, ``apply``), ``optimize``, ``annotate`` and ``run`` to
    ``subparsers`` (from ``parser.add_subparsers()``)."""
    xf = _parser(subparsers, 'xforms', 'list or apply the transformations that match an SDFG file',
                 'List the pattern matches of the registered transformations on an SDFG (sdfgsparse\'s, '
                 "CATEGORY 'Sparse', and DaCe's), or apply one and save the result.",
                 '  sdfgsparse xforms list gcn.sdfg\n'
                 '  sdfgsparse xforms apply gcn.sdfg SparseEpilogueFusion -o gcn_fused.sdfg\n')
    xsub = xf.add_subparsers(dest='xforms_command', metavar='{list,apply}', required=True)
    p = _parser(xsub, 'list', 'the pattern matches on an SDFG, one line each',
                "One line per match: its index among the matches of that transformation (the --index of "
                "`xforms apply`), the transformation, its CATEGORY and where it matches (cfg and state, the "
                "matched nodes). Without --all only sdfgsparse's transformations (CATEGORY 'Sparse') are listed, "
                "with a count of the others.",
                '  sdfgsparse xforms list gcn.sdfg\n'
                '  sdfgsparse xforms list gcn.sdfg --all\n')
    p.add_argument('sdfg', metavar='FILE.sdfg', help='SDFG file (.sdfg or .sdfgz)')
    p.add_argument('--all', action='store_true', help="also list DaCe's transformations")
    p.set_defaults(func=xforms_list)
    p = _parser(xsub, 'apply', 'apply a transformation where it matches and save the SDFG',
                'Apply transformation NAME (one of sdfgsparse\'s or any DaCe pattern transformation, by class '
                'name) at its first match (--index I: the I-th; --every: every match, matching again after each '
                f'application; a transformation still matching after {EVERY_LIMIT} applications is refused, nothing '
                'saved), validate the SDFG, prove the result (run it before and after on small random inputs of the '
                'declared shapes and formats and compare every output; --no-verify skips this) and save it. --where keeps the matches whose '
                'description (as `xforms list` prints it: cfg, state, node labels; an access node is labelled '
                'with its data name) contains TEXT. Exit '
                'status 1 when nothing matches or the result changes, 2 for an unknown name or property.',
                '  sdfgsparse xforms apply gcn.sdfg SparseEpilogueFusion -o gcn_fused.sdfg\n'
                '  sdfgsparse xforms apply gcn.sdfg MapTiling --where _numpy_maximum --set \'tile_sizes=[32]\' '
                '-o gcn_tiled.sdfg\n'
                '  sdfgsparse xforms apply gcn.sdfg MapExpansion --every --in-place\n')
    p.add_argument('sdfg', metavar='FILE.sdfg', help='SDFG file (.sdfg or .sdfgz)')
    p.add_argument('name', metavar='NAME', help='transformation class name, e.g. SparseEpilogueFusion, MapTiling')
    p.add_argument('--where', metavar='TEXT', default=None, help='only matches whose description contains TEXT')
    p.add_argument('--index', type=int, default=None, metavar='I', help='apply the I-th remaining match (from 0)')
    p.add_argument('--every', action='store_true', help='apply every match, matching again after each')
    p.add_argument('--set', action='append', default=[], metavar='PROP=VALUE',
                   help='set a property of the transformation (VALUE is JSON when it parses, else a string; repeat '
                   'for more)')
    p.add_argument('--no-verify', action='store_true',
                   help='save without running the SDFG before and after on random inputs of the declared shapes and '
                   'formats (by default a transformation that changes any output, or an SDFG that cannot be run '
                   'here, is not saved: exit 1)')
    _save_options(p)
    p.set_defaults(func=xforms_apply)

    p = _parser(subparsers, 'optimize', 'the sparse optimisation pipeline (ss.optimize) on an SDFG file',
                'Apply ss.optimize to an SDFG file and save the result; print the report (what each step '
                'applied and why). Example arguments (--matrices, --arg) give the sizes and structure the '
                'format selection, tiling and the data-movement model decide by; they are recorded on the SDFG. '
                'Matrix Market files become the declared format of their argument.',
                '  sdfgsparse optimize gcn.sdfg --matrices gcn_inputs/ -o gcn_opt.sdfg   # gcn_inputs/A.mtx.gz, X.npy, '
                '...\n'
                '  sdfgsparse optimize spmv.sdfg --arg A=tests/data/cora_A.mtx.gz -o spmv_opt.sdfg\n'
                '  sdfgsparse optimize gcn.sdfg --target gpu -o gcn_gpu.sdfg\n')
    p.add_argument('sdfg', metavar='FILE.sdfg', help='SDFG file (.sdfg or .sdfgz)')
    p.add_argument('--target', choices=['cpu', 'gpu', 'fpga'], default='cpu', help='what to optimise for '
                   '(default: cpu)')
    _example_options(p)
    _save_options(p)
    p.set_defaults(func=optimize)

    p = _parser(subparsers, 'annotate', 'record the sizes and structure statistics of example arguments on an SDFG',
                'Record on the SDFG the symbol values and structure statistics of example arguments (the '
                'matrices are not kept), so that the transformations that need them (SparseFormatSelection, '
                'SparseDenseTiling, the fusion models) match and decide without being told, e.g. in `xforms '
                'list` or the VS Code extension.',
                '  sdfgsparse annotate gcn.sdfg --matrices gcn_inputs/ -o gcn_annotated.sdfg   # files named after the '
                'arguments\n'
                '  sdfgsparse annotate spmv.sdfg --arg A=tests/data/cora_A.mtx.gz --in-place\n')
    p.add_argument('sdfg', metavar='FILE.sdfg', help='SDFG file (.sdfg or .sdfgz)')
    _example_options(p)
    _save_options(p)
    p.set_defaults(func=annotate)

    p = _parser(subparsers, 'run', 'compile an SDFG file and run it on argument files',
                'Compile the SDFG (once; DaCe\'s build cache) and call it with every argument read from a file or '
                'given as a number, checked as a Python call checks them. Argument files: .mtx / .mtx.gz (Matrix '
                'Market; converted to the format and dtypes the argument declares, sparse or dense), .npy '
                '(passed as stored: its dtype and shape must fit). Results: printed (dense arrays summarised, '
                'sparse ones as shape, nnz and format), or written with -o: one result to OUT (.npy for a '
                'dense one, .mtx for either); several to the folder OUT as result_0.npy, result_1.mtx, ... '
                '(.npy dense, .mtx sparse). A program that returns nothing shows the arguments it writes.',
                '  sdfgsparse run spmv.sdfg --arg A=tests/data/cora_A.mtx.gz --arg x=x.npy -o y.npy\n'
                '  sdfgsparse run scale.sdfg --arg A=A.mtx --arg alpha=1.5\n'
                '  sdfgsparse run add.sdfg --arg A=A.mtx --arg B=B.mtx -o C.mtx\n'
                '  sdfgsparse run two_results.sdfg --arg A=A.mtx -o results/\n')
    p.add_argument('sdfg', metavar='FILE.sdfg', help='SDFG file (.sdfg or .sdfgz)')
    p.add_argument('--arg', action='append', default=[], metavar='NAME=PATH',
                   help='an argument: a .mtx / .mtx.gz / .npy file, or a number for a scalar (repeat for each)')
    p.add_argument('--symbol', action='append', default=[], metavar='N=VALUE',
                   help='value of a symbol the arguments do not fix (repeat for more)')
    p.add_argument('-o', '--output', default=None, metavar='OUT',
                   help='write the result(s): OUT.npy or OUT.mtx; a folder for several')
    p.set_defaults(func=run)
