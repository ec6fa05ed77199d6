"""The command-line words of a parsed ``sdfgsparse bench`` run, for the processes it
re-executes (:mod:`sdfgsparse.bench.cli`, :mod:`sdfgsparse.bench.isolation`)."""
from typing import List

__all__ = ['to_argv']


def to_argv(args) -> List[str]:
    """Command-line words that parse back to ``args`` (for the re-executed child)."""
    argv = ['bench', '--threads', str(args.threads), '--repeat', str(args.repeat), '--peers', args.peers]
    for opt in ('matrices', 'kernels', 'json', 'plot', 'stream_mib'):
        value = getattr(args, opt)
        if value is not None:
            argv += [f'--{opt.replace("_", "-")}', str(value)]
    if args.quick:
        argv.append('--quick')
    if args.no_progress:
        argv.append('--no-progress')
    if getattr(args, 'optimize', False):
        argv.append('--optimize')
    if getattr(args, 'isolation', 'same') != 'same':
        argv += ['--isolation', args.isolation]
    if getattr(args, 'only', None):
        argv += ['--only', args.only]
    if getattr(args, 'march', None):
        argv += ['--march', args.march]
    if getattr(args, 'check', False):
        argv.append('--check')
    if getattr(args, 'with_mkl', False):
        argv.append('--with-mkl')
    if getattr(args, 'busy', 0):
        argv += ['--busy', str(int(args.busy))]
    if getattr(args, 'suite', 'kernels') != 'kernels':
        argv += ['--suite', args.suite]
    if getattr(args, 'target', 'cpu') != 'cpu':
        argv += ['--target', args.target, '--board', args.board, '--clock-mhz', str(args.clock_mhz)]
    return argv
