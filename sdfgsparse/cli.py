"""The ``sdfgsparse`` command (also ``python -m sdfgsparse``).

    sdfgsparse demo [--matrices DIR]       run the samples on bundled matrices, check vs scipy
    sdfgsparse bench [--quick] [...]       benchmark against scipy, torch and other peers
    sdfgsparse analyze prog.sdfg [...]     I/O lower bound (SOAP) of an SDFG
    sdfgsparse cache [--prune] [...]       list or prune the folder of compiled programs
"""
import argparse
import importlib
import os
import sys

__all__ = ['main']

SAMPLES = ['spmv', 'gcn', 'sparse_algebra', 'attention', 'cg', 'transformations_by_hand', 'fpga']


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


def cache(args) -> int:
    from sdfgsparse.runtime import buildcache
    folder = os.path.abspath(args.folder) if args.folder else buildcache.default_folder()
    if args.older_than is not None and args.older_than < 0:
        print(f'sdfgsparse cache: --older-than must be at least 0 days, got {args.older_than}', file=sys.stderr)
        return 2
    if args.older_than is not None and not args.prune:
        print('sdfgsparse cache: --older-than needs --prune', file=sys.stderr)
        return 2
    folders = buildcache.scan(folder)
    mib = lambda n: n / 2**20
    broken = [f for f in folders if f.status == 'broken']
    if not args.prune:
        print(f'{folder}: {len(folders)} build folders, {mib(sum(f.size for f in folders)):.1f} MiB'
              + (f'; {len(broken)} broken (sdfgsparse cache --prune removes them)' if broken else ''))
        if folders:
            print(f'{"program":<48} {"MiB":>8} {"last used, days":>16}  {"built by":<27} state')
        for f in folders:
            who = 'this sdfgsparse' if f.current else 'another sdfgsparse (stale)' if f.ours else 'not sdfgsparse'
            state = f'broken: {f.reason}' if f.status == 'broken' else f.status
            name = f.program or os.path.basename(f.path)
            print(f'{name:<48} {mib(f.size):8.1f} {f.age_days:16.1f}  {who:<27} {state}')
        return 0
    in_use = []
    try:
        gone = buildcache.prune(folder, older_than_days=args.older_than, dry_run=args.dry_run, in_use=in_use,
                                found=folders)
    except buildcache.BuildCacheError as exc:
        print(f'sdfgsparse cache: {exc}', file=sys.stderr)
        return 1
    verb = 'would remove' if args.dry_run else 'removed'
    for f in gone:
        why = f', broken: {f.reason}' if f.status == 'broken' else ''
        print(f'{verb} {os.path.basename(f.path)} ({mib(f.size):.1f} MiB{why})')
    print(f'{folder}: {verb} {len(gone)} of {len(folders)} build folders, {mib(sum(f.size for f in gone)):.1f} MiB'
          + (f'; {len(in_use)} in use by another process, left' if in_use else ''))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='sdfgsparse', description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True)
    p = sub.add_parser('demo', help='run the samples on bundled matrices and check them against scipy')
    p.add_argument('--matrices', default=None, help='folder of .mtx / .mtx.gz files (default: tests/data)')
    p.set_defaults(func=demo)
    p = sub.add_parser('cache', help='list or prune the folder of compiled programs (DaCe\'s build folder)',
                       description='List the build folders of compiled programs and their state (ok, broken: '
                       'an unfinished or damaged build, in use: another process holds its lock), or remove the '
                       'broken ones and those built by another sdfgsparse source (and, with --older-than, those '
                       'unused for that many days). Folders sdfgsparse did not name are never removed.')
    p.add_argument('--folder', default=None, help="DaCe's build folder (default: DACE_default_build_folder, "
                   '.dacecache under the working directory)')
    p.add_argument('--prune', action='store_true', help='remove broken and stale build folders')
    p.add_argument('--older-than', type=float, default=None, metavar='DAYS',
                   help='with --prune: also remove current builds unused for DAYS days')
    p.add_argument('--dry-run', action='store_true', help='with --prune: only say what would be removed')
    p.set_defaults(func=cache)
    from sdfgsparse.analysis import cli as analysis_cli
    analysis_cli.add_parser(sub)
    from sdfgsparse.bench import cli as bench_cli
    bench_cli.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        if getattr(args, 'func', None) is None:
            return analysis_cli.run(args)
        return args.func(args)
    except BrokenPipeError:  # output piped into a reader that stopped (`| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == '__main__':
    sys.exit(main())
