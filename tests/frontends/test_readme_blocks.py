"""Every code block of README.md runs as written.

A block is fenced with a language: ``python`` blocks run as a script (in a process of
their own, from a file: DaCe reads a program's source), ``sh`` blocks run under
``bash -e`` from the repository's folder, ``text`` blocks are synopses and are not run.
A block without a language fails the test, so a new example cannot slip in untested.
"""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / 'README.md'
RUN = {'python', 'sh'}
SYNOPSIS = {'text'}

pytestmark = pytest.mark.xdist_group('readme')  # one worker: the blocks share DaCe's cache


def blocks(text: str):
    """``(language, first line number, code)`` of each fenced block of ``text``."""
    found, lang, start, body = [], None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r'^```(\S*)\s*$', line)
        if lang is None and fence:
            lang, start, body = fence.group(1), number, []
        elif lang is not None and line.startswith('```'):
            found.append((lang, start, '\n'.join(body) + '\n'))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f'README.md: the block at line {start} is not closed'
    return found


BLOCKS = blocks(README.read_text())


def test_every_block_names_its_language():
    untagged = [start for lang, start, _ in BLOCKS if lang not in RUN | SYNOPSIS]
    assert not untagged, f'README.md blocks at lines {untagged}: fence them as python, sh or text'
    assert sum(lang in RUN for lang, _, _ in BLOCKS) >= 5


def test_blocks_are_found():
    sample = 'a\n```python\nx = 1\n```\n```text\nfoo\n```\n'
    assert blocks(sample) == [('python', 2, 'x = 1\n'), ('text', 5, 'foo\n')]
    with pytest.raises(AssertionError, match='not closed'):
        blocks('```sh\nls\n')


def _run(cmd, cwd, what):
    env = dict(os.environ, PYTHONPATH='')  # as a user runs it: the installed package only
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f'{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}'
    return proc


@pytest.mark.parametrize('lang,start,code', [b for b in BLOCKS if b[0] in RUN],
                         ids=[f'{b[0]}-line{b[1]}' for b in BLOCKS if b[0] in RUN])
def test_block_runs(lang, start, code, tmp_path):
    what = f'README.md, the {lang} block at line {start}'
    if lang == 'python':
        if re.search(r'^import torch|^from torch', code, re.M) and importlib.util.find_spec('torch') is None:
            pytest.skip('torch is not installed (optional)')
        script = tmp_path / f'readme_line{start}.py'
        script.write_text(code)
        _run([sys.executable, str(script)], ROOT, what)
    else:
        if not (ROOT / '.venv' / 'bin' / 'activate').exists():
            pytest.skip('the block activates the repository venv (make venv)')
        _run(['bash', '-e', '-c', code], ROOT, what)
