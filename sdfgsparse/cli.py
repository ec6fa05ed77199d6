"""The ``sdfgsparse`` command (also ``python -m sdfgsparse``).

    sdfgsparse demo [--matrices DIR]       run the samples on bundled matrices, check vs scipy
    sdfgsparse bench [--quick] [...]       benchmark against scipy, torch and other peers
    sdfgsparse analyze prog.sdfg [...]     I/O lower bound (SOAP) of an SDFG
    sdfgsparse xforms list|apply prog.sdfg list or apply the transformations that match an SDFG
    sdfgsparse optimize prog.sdfg -o OUT   the sparse pipeline (ss.optimize) on an SDFG file
    sdfgsparse annotate prog.sdfg -o OUT   record example sizes and statistics on an SDFG
    sdfgsparse run prog.sdfg --arg A=a.mtx compile and run an SDFG on argument files
    sdfgsparse cache [--prune] [...]       list or prune the folder of compiled programs
    sdfgsparse vscode-setup [WORKSPACE]    make the DaCe VS Code extension load sdfgsparse
"""
import argparse
import importlib
import os
import sys

__all__ = ['main']

#: width of the demo table's kernel column (the longest label: attention-unfused)
KERNEL_WIDTH = 17

SAMPLES = ['spmv', 'gcn', 'sparse_algebra', 'attention', 'cg', 'transformations_by_hand', 'fpga']


def _samples_dir():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'samples')


def _demo_matrices(folder) -> str:
    """The folder the demo runs on (``--matrices``, else the bundled ``tests/data``), each of
    its matrices read once here: a missing folder, one without matrices or an unreadable
    file is a :class:`~sdfgsparse.bench.errors.MatrixError` before any sample starts."""
    from sdfgsparse.bench.errors import MatrixError
    from sdfgsparse.bench.matrices import from_folder, shipped_folder
    if folder is None:
        folder = shipped_folder()
        if folder is None:
            raise MatrixError('the bundled matrices (tests/data of the source tree) are missing; '
                              'give a folder of .mtx / .mtx.gz files with --matrices')
    for source in from_folder(folder):
        source.load()
    return folder


def demo(args) -> int:
    from sdfgsparse.bench.errors import MatrixError
    from sdfgsparse.bench.progress import Progress
    folder = _samples_dir()
    if not os.path.isdir(folder):
        print('sdfgsparse demo: the samples/ folder of the source tree is needed; run it from a source checkout',
              file=sys.stderr)
        return 2
    try:
        matrices = _demo_matrices(args.matrices)
    except MatrixError as exc:
        print(f'sdfgsparse demo: {exc}', file=sys.stderr)
        return 2
    sys.path.insert(0, folder)
    failures = 0
    progress = Progress(len(SAMPLES), enabled=False)  # a line per sample (stderr), between the table's rows
    print(f'{"kernel":<{KERNEL_WIDTH}} {"matrix":<16} {"max rel err":>12} {"first call s":>13} {"warm call ms":>13}  check')
    for sample in SAMPLES:
        progress.begin(sample)
        mod = importlib.import_module(sample)
        for kernel, matrix, err, first, warm in mod.main(matrices):
            ok = err < 1e-5
            failures += not ok
            print(f'{kernel:<{KERNEL_WIDTH}} {matrix:<16} {err:12.2e} {first:13.2f} {warm * 1e3:13.3f}  {"ok" if ok else "WRONG"}')
        progress.step()
    print('all results agree with scipy' if not failures else f'{failures} results disagree with scipy')
    return 1 if failures else 0


def cache(args) -> int:
    from sdfgsparse.build import cache as buildcache
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


def vscode_setup(args) -> int:
    import json
    from sdfgsparse import vscode
    if args.print:
        print(json.dumps(vscode.settings(args.python), indent=4))
        return 0
    try:
        path = vscode.write_settings(args.workspace, args.python)
    except vscode.VSCodeSetupError as exc:
        print(f'sdfgsparse vscode-setup: {exc}', file=sys.stderr)
        return 2
    s = vscode.settings(args.python)
    print(f'wrote {path}\n  backend interpreter: {s["dace.backend.interpreterPath"]}\n  custom transformations: '
          f'{vscode.LOADER}')
    missing = vscode.missing_backend_packages(args.python)
    if missing:
        print(f'warning: this interpreter lacks {", ".join(missing)}, which the extension\'s backend imports; '
              "install them with: pip install -e '.[vscode]'", file=sys.stderr)
    print('Open the workspace in VS Code (extension: DaCe SDFG Optimizer), open an .sdfg file: the Sparse '
          'transformations are listed where they match.')
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
    p = sub.add_parser('vscode-setup', help='set up a VS Code workspace for the DaCe extension with sdfgsparse',
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description='Write WORKSPACE/.vscode/settings.json (other settings kept) so that the DaCe VS '
                       'Code extension runs its backend with this Python and loads sdfgsparse\'s transformations '
                       'whenever it starts (absolute paths: the extension does not expand ${workspaceFolder}).',
                       epilog='examples:\n  .venv/bin/python -m sdfgsparse vscode-setup            # this folder\n'
                       '  .venv/bin/python -m sdfgsparse vscode-setup ~/work/proj\n'
                       '  sdfgsparse vscode-setup --print                        # show the settings only')
    p.add_argument('workspace', nargs='?', default='.', help='the folder opened in VS Code (default: .)')
    p.add_argument('--python', default=None, help='interpreter for the backend (default: this one)')
    p.add_argument('--print', action='store_true', help='print the settings instead of writing them')
    p.set_defaults(func=vscode_setup)
    from sdfgsparse.scripting import analyze as analysis_cli
    analysis_cli.add_parser(sub)
    from sdfgsparse.scripting import commands as scripting_cli
    scripting_cli.add_parsers(sub)
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
