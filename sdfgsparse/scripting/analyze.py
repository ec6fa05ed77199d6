"""``sdfgsparse analyze prog.sdfg [--cache-words N] [--json]``: print an SDFG's I/O lower bound.

The top-level ``sdfgsparse`` command adds this sub-command with :func:`add_parser` and
calls :func:`run` with the parsed arguments.
"""
import argparse
import sys
from typing import Optional, Sequence

from sdfgsparse.scripting.commands import unexpected

__all__ = ['add_parser', 'run', 'main']


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'--cache-words {text!r}: expected a positive integer number of words')
    if value <= 0:
        raise argparse.ArgumentTypeError(f'--cache-words {text}: the fast memory must hold at least one word')
    return value


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``analyze`` sub-command to ``subparsers`` (from ``parser.add_subparsers()``)."""
    p = subparsers.add_parser('analyze',
                              help='I/O lower bound (SOAP) of an SDFG',
                              description='Print a lower bound on the words an SDFG moves between a fast memory '
                              'of S words and slow memory, per statement and in total.')
    p.add_argument('prog', metavar='prog.sdfg', help='SDFG file (.sdfg or .sdfgz)')
    p.add_argument('--cache-words', type=_positive_int, default=None, metavar='N',
                   help='fast-memory size in words (default: keep the symbol S)')
    p.add_argument('--json', action='store_true', help='print the result as JSON')
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Run ``analyze``; returns the exit status (0 ok, 2 unreadable file or unsupported program)."""
    from sdfgsparse.analysis.errors import AnalysisError
    from sdfgsparse.analysis.lower_bound import io_lower_bound
    from sdfgsparse.scripting.files import ScriptingError, load_sdfg
    try:  # JSON only: DaCe's SDFG.from_file unpickles (runs) a file that is not JSON
        sdfg = load_sdfg(args.prog)
    except ScriptingError as exc:
        print(f'sdfgsparse analyze: {exc}' + (f'\nhint: {exc.hint}' if exc.hint else ''), file=sys.stderr)
        return 2
    try:
        result = io_lower_bound(sdfg, args.cache_words)
    except AnalysisError as exc:
        print(f'sdfgsparse analyze: {exc}', file=sys.stderr)
        return 2
    except Exception as exc:  # DaCe failing on an SDFG it loaded: one line, not a traceback
        return unexpected('analyze', exc)
    print(result.to_json(indent=2) if getattr(args, 'json', False) else result.table())
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Stand-alone entry point (``python -m sdfgsparse.scripting.analyze analyze prog.sdfg``)."""
    parser = argparse.ArgumentParser(prog='sdfgsparse')
    sub = parser.add_subparsers(dest='command', required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
