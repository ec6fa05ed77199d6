"""The ``sdfgsparse`` command (also ``python -m sdfgsparse``).

    sdfgsparse demo [--matrices DIR]       run the samples on bundled matrices, check vs scipy
    sdfgsparse bench [--quick] [...]       benchmark against scipy, torch and other peers
    sdfgsparse analyze prog.sdfg [...]     I/O lower bound (SOAP) of an SDFG
"""
import argparse
import importlib
import os
import sys

__all__ = ['main']

SAMPLES = ['spmv', 'gcn', 'sparse_algebra', 'attention', 'cg', 'transformations_by_hand']


def _samples_dir():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'samples')


def demo(args) -> int:
    folder = _samples_dir()
    if not os.path.isdir(folder):
        print('sdfgsparse demo: the samples/ folder of the source tree is needed', file=sys.stderr)
        return 2
    sys.path.insert(0, folder)
    failures = 0
    print(f'{"kernel":<14} {"matrix":<16} {"max rel err":>12} {"first call s":>13} {"warm call ms":>13}  check')
    for sample in SAMPLES:
        mod = importlib.import_module(sample)
        for kernel, matrix, err, first, warm in mod.main(args.matrices):
            ok = err < 1e-5
            failures += not ok
            print(f'{kernel:<14} {matrix:<16} {err:12.2e} {first:13.2f} {warm * 1e3:13.3f}  {"ok" if ok else "WRONG"}')
    print('all results agree with scipy' if not failures else f'{failures} results disagree with scipy')
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='sdfgsparse', description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True)
    p = sub.add_parser('demo', help='run the samples on bundled matrices and check them against scipy')
    p.add_argument('--matrices', default=None, help='folder of .mtx / .mtx.gz files (default: tests/data)')
    p.set_defaults(func=demo)
    from sdfgsparse.analysis import cli as analysis_cli
    analysis_cli.add_parser(sub)
    from sdfgsparse.bench import cli as bench_cli
    bench_cli.add_parser(sub)
    args = parser.parse_args(argv)
    if getattr(args, 'func', None) is None:
        return analysis_cli.run(args)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
