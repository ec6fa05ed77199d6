"""The compile target of generated CPU code: the ``-march`` flag in DaCe's compiler settings.

DaCe compiles every program with ``dace.Config.get('compiler', 'cpu', 'args')``, which
holds ``-march=native`` by default: the code then uses every instruction of the machine
that builds it, and the register-blocked kernels size their vectors by the widest vector
register of that target (``SS_VECTOR_BYTES`` in :mod:`.dense_loops`: 64 bytes with
``__AVX512F__``, 32 with ``__AVX__``, 16 otherwise). :func:`set_target` builds for
another target instead (``x86-64-v3``: AVX2 and FMA, 32-byte vectors), e.g. to measure
what a machine without AVX-512 gets; the build folder's name hashes the compiler
settings, so each target has builds of its own.

:func:`set_target` checks the target before taking it: the compiler must accept
``-march=ARCH``, and this CPU must be able to run what it generates. The second check
asks the compiler which instruction-set macros the target defines
(``<compiler> -march=ARCH -dM -E -x c++ /dev/null``: ``__AVX512F__``, ``__AVX2__``,
``__FMA__`` …) and compares them with the flags of ``/proc/cpuinfo``: nothing is compiled
or run, so a target beyond this CPU fails with a message instead of SIGILL.

:func:`describe` is the record a benchmark prints: CPU model, compiler and version, the
``-march`` value and what ``-march=native`` resolves to (``-Q --help=target``), vector
bytes. The compiler is DaCe's configured one (``compiler.cpu.executable``), else ``$CXX``,
else ``c++`` (CMake's choice when DaCe names none). Compiler answers are cached per
process. The CPU check reads Linux's ``/proc/cpuinfo``; where it cannot be read, the CPU
is not checked and :func:`describe` says ``'unknown'`` for what it cannot tell.
"""
import functools
import os
import platform
import shlex
import subprocess
from typing import Dict, FrozenSet, List, Optional, Tuple

import dace

from sdfgsparse.errors import DeviceError

__all__ = ['current', 'set_target', 'vector_bytes', 'describe', 'check_target', 'cpu_flags', 'cpu_model',
           'compiler', 'target_macros', 'ISA_FLAGS']

#: Instruction-set macros a target may define, with the ``/proc/cpuinfo`` flag a CPU needs
#: to run code that uses them.
ISA_FLAGS: Dict[str, str] = {
    '__AVX512F__': 'avx512f',
    '__AVX512BW__': 'avx512bw',
    '__AVX512DQ__': 'avx512dq',
    '__AVX512VL__': 'avx512vl',
    '__AVX512CD__': 'avx512cd',
    '__AVX2__': 'avx2',
    '__AVX__': 'avx',
    '__FMA__': 'fma',
    '__F16C__': 'f16c',
    '__BMI2__': 'bmi2',
    '__SSE4_2__': 'sse4_2',
    '__SSE4_1__': 'sse4_1',
    '__SSSE3__': 'ssse3',
    '__POPCNT__': 'popcnt',
    '__AVX512VNNI__': 'avx512_vnni',
    '__AVX512BF16__': 'avx512_bf16',
    '__AVX512FP16__': 'avx512_fp16',
    '__AVX512IFMA__': 'avx512ifma',
    '__AVX512VBMI__': 'avx512vbmi',
    '__AVX512VBMI2__': 'avx512_vbmi2',
    '__AVX512BITALG__': 'avx512_bitalg',
    '__AVX512VPOPCNTDQ__': 'avx512_vpopcntdq',
    '__AVXVNNI__': 'avx_vnni',
    '__AMX_TILE__': 'amx_tile',
    '__GFNI__': 'gfni',
    '__VAES__': 'vaes',
    '__VPCLMULQDQ__': 'vpclmulqdq',
    '__MOVBE__': 'movbe',
    '__BMI__': 'bmi1',
    '__ADX__': 'adx',
}

UNKNOWN = 'unknown'
_ENV = 'DACE_compiler_cpu_args'
_TIMEOUT_S = 30


def _cpu_args() -> List[str]:
    return shlex.split(dace.Config.get('compiler', 'cpu', 'args') or '')


def compiler() -> str:
    """The C++ compiler DaCe's CMake build uses (see the module docstring)."""
    return dace.Config.get('compiler', 'cpu', 'executable') or os.environ.get('CXX') or 'c++'


def current() -> Optional[str]:
    """The ``-march`` value of DaCe's ``compiler.cpu.args`` (``'native'`` by default; the
    last one where there are several), or None where the flags name none (the compiler's
    own default target)."""
    value = None
    for word in _cpu_args():
        if word.startswith('-march='):
            value = word[len('-march='):]
    return value


@functools.lru_cache(maxsize=None)
def _macros(cxx: str, flags: Tuple[str, ...]) -> Tuple[Optional[FrozenSet[str]], str]:
    """The macros ``cxx`` defines with ``flags`` (None and the compiler's message when it
    refuses them or cannot be run)."""
    cmd = [cxx, *flags, '-dM', '-E', '-x', 'c++', os.devnull]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f'{cxx} could not be run: {exc}'
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        return None, (lines[0] if lines else f'{cxx} exited with status {proc.returncode}')
    names = set()
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == '#define':
            names.add(parts[1])
    return frozenset(names), ''


def target_macros(arch: Optional[str] = None) -> Optional[FrozenSet[str]]:
    """The instruction-set macros of :data:`ISA_FLAGS` that code compiled for ``arch``
    may use (default: DaCe's current flags, every ``-m`` option of them), or None where
    the compiler refuses ``arch`` or cannot be run."""
    if arch is None:
        flags = tuple(w for w in _cpu_args() if w.startswith('-m'))
    else:
        flags = (f'-march={arch}', )
    names, _ = _macros(compiler(), flags)
    return None if names is None else frozenset(names & set(ISA_FLAGS))


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> Dict[str, str]:
    """The first processor's entries of ``/proc/cpuinfo`` (empty where it cannot be read)."""
    out: Dict[str, str] = {}
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if not line.strip():
                    if out:
                        break
                    continue
                key, _, value = line.partition(':')
                out.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return out


def cpu_flags() -> Optional[FrozenSet[str]]:
    """The instruction-set flags of this CPU (``/proc/cpuinfo``'s ``flags``), or None where
    they cannot be read (not Linux)."""
    flags = _cpuinfo().get('flags')
    return frozenset(flags.split()) if flags is not None else None


def cpu_model() -> str:
    """The CPU's ``model name`` from ``/proc/cpuinfo`` (else what :mod:`platform` says, else ``'unknown'``)."""
    return _cpuinfo().get('model name') or platform.processor() or platform.machine() or UNKNOWN


def check_target(arch: str) -> None:
    """Raise :class:`~sdfgsparse.errors.DeviceError` unless the compiler accepts
    ``-march=arch`` and this CPU can run code built for it (see the module docstring; where
    the CPU's flags cannot be read, only the compiler is asked)."""
    if not isinstance(arch, str) or not arch or any(c.isspace() for c in arch) or arch.startswith('-'):
        raise DeviceError(f'-march {arch!r}: expected a target name such as x86-64-v3 or native')
    cxx = compiler()
    names, why = _macros(cxx, (f'-march={arch}', ))
    if names is None:
        raise DeviceError(f'-march={arch}: the compiler ({cxx}) refuses it: {why}')
    if arch == 'native':
        return
    have = cpu_flags()
    if have is None:
        return
    lacking = sorted(flag for macro, flag in ISA_FLAGS.items() if macro in names and flag not in have)
    if lacking:
        raise DeviceError(f'-march={arch}: this CPU ({cpu_model()}) cannot run code built for it: it lacks '
                          f'{", ".join(lacking)}; choose a target it can run (native always is)')


def set_target(arch: str) -> Optional[str]:
    """Build generated CPU code for ``-march=arch`` in this process: the ``-march`` flag of
    DaCe's ``compiler.cpu.args`` is replaced (or added), and in ``DACE_compiler_cpu_args``
    where that variable is set (DaCe reads it before its settings). Checked first
    (:func:`check_target`: a :class:`~sdfgsparse.errors.DeviceError` names the argument
    and what the compiler or the CPU lacks; the flags are then unchanged). Returns the
    previous value (:func:`current`). Programs compiled before keep their build."""
    check_target(arch)
    before = current()
    words, flag = [], f'-march={arch}'
    for w in _cpu_args():
        if not w.startswith('-march='):
            words.append(w)
        elif flag not in words:
            words.append(flag)  # in the place of the first -march, the others dropped
    if flag not in words:
        words.append(flag)
    value = ' '.join(shlex.quote(w) for w in words)
    dace.Config.set('compiler', 'cpu', 'args', value=value)
    if _ENV in os.environ:  # it overrides the setting in every Config.get: change it too
        os.environ[_ENV] = value
    return before


def vector_bytes(arch: Optional[str] = None) -> Optional[int]:
    """Bytes of the widest vector register code built for ``arch`` uses (default: DaCe's
    current flags), as ``SS_VECTOR_BYTES`` decides: 64 with ``__AVX512F__``, 32 with
    ``__AVX__``, 16 otherwise; None where the compiler refuses ``arch`` or cannot be run."""
    names = target_macros(arch)
    if names is None:
        return None
    return 64 if '__AVX512F__' in names else 32 if '__AVX__' in names else 16


@functools.lru_cache(maxsize=None)
def _output(cxx: str, *args: str) -> Optional[str]:
    try:
        proc = subprocess.run([cxx, *args], capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _native() -> str:
    """What ``-march=native`` resolves to (GCC's ``-Q --help=target``; ``'unknown'`` elsewhere)."""
    out = _output(compiler(), '-march=native', '-Q', '--help=target')
    for line in (out or '').splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == '-march=':
            return parts[1]
    return UNKNOWN


def describe() -> Dict[str, object]:
    """This process's compile target: ``{"cpu", "compiler", "compiler_version", "march",
    "native", "vector_bytes", "flags"}`` (``march``: :func:`current`, None where the flags
    name none; ``native``: what ``-march=native`` resolves to; ``flags``: every ``-m``
    option of DaCe's flags); ``'unknown'`` for what cannot be told."""
    cxx = compiler()
    version = _output(cxx, '--version')
    vb = vector_bytes()
    return {
        'cpu': cpu_model(),
        'compiler': cxx,
        'compiler_version': version.splitlines()[0].strip() if version else UNKNOWN,
        'march': current(),
        'native': _native(),
        'vector_bytes': vb if vb is not None else UNKNOWN,
        'flags': ' '.join(w for w in _cpu_args() if w.startswith('-m')),
    }
