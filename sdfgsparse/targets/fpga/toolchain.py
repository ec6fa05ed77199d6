"""What the FPGA target's C-simulation needs on this machine: a C++17 compiler and the
Xilinx arbitrary-precision headers.

DaCe's generated device code includes hlslib (shipped inside the dace wheel) and, through
it, Xilinx's ``ap_int.h`` / ``ap_fixed.h``. Those are the open HLS_arbitrary_Precision_Types
sources (Apache-2.0); Vitis HLS ships them, and so does the ``hls4ml`` wheel, which is
where :func:`fetch_ap_types` takes them from (``pip download``, no dependencies, headers
and licence only; not ``hls_stream.h``, which is Xilinx's proprietary one and which the
simulation does not need). ``make venv`` runs it; so can a user::

    python -m sdfgsparse.targets.fpga.toolchain --fetch-ap-types

:func:`ap_types_dir` looks, in order, at ``$SDFGSPARSE_AP_TYPES``, the copy
:func:`fetch_ap_types` put in this environment (``<prefix>/share/sdfgsparse/ap_types``),
an installed ``hls4ml``, and a Vitis HLS installation (``$XILINX_HLS/include``).
"""
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from typing import Optional, Tuple

from sdfgsparse import errors

__all__ = ['ap_types_dir', 'fetch_ap_types', 'compiler', 'require_csim', 'hlslib_include', 'dace_include',
           'AP_TYPES_SOURCE']

#: The wheel :func:`fetch_ap_types` takes the headers from, and where they are in it.
AP_TYPES_SOURCE = ('hls4ml', '1.3.0', 'hls4ml/templates/vivado/ap_types/')
_NOT_COPIED = ('hls_stream.h', )  # proprietary (and not needed by the simulation)

_LOCK = threading.Lock()
_CACHE = {}


def _default_dest() -> str:
    return os.path.join(sys.prefix, 'share', 'sdfgsparse', 'ap_types')


def _has_ap_int(path: Optional[str]) -> bool:
    return bool(path) and os.path.isfile(os.path.join(path, 'ap_int.h'))


def ap_types_dir() -> Optional[str]:
    """The folder holding ``ap_int.h`` (see the module), or None."""
    candidates = [os.environ.get('SDFGSPARSE_AP_TYPES'), _default_dest()]
    spec = importlib.util.find_spec('hls4ml') if 'hls4ml' not in sys.modules else None
    origin = spec.origin if spec is not None else getattr(sys.modules.get('hls4ml'), '__file__', None)
    if origin:
        candidates.append(os.path.join(os.path.dirname(origin), 'templates', 'vivado', 'ap_types'))
    for var in ('XILINX_HLS', 'XILINX_VITIS'):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], 'include'))
    return next((os.path.abspath(c) for c in candidates if _has_ap_int(c)), None)


def fetch_ap_types(dest: Optional[str] = None, wheel: Optional[str] = None) -> str:
    """Put the arbitrary-precision headers (and their licence) in ``dest`` (default: this
    environment's ``share/sdfgsparse/ap_types``); returns ``dest``. ``wheel``: a local
    ``hls4ml`` wheel, else ``pip download`` fetches it."""
    dest = os.path.abspath(dest or _default_dest())
    name, version, prefix = AP_TYPES_SOURCE
    with tempfile.TemporaryDirectory(prefix='sdfgsparse-ap-types-') as tmp:
        if wheel is None:
            cmd = [sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', f'{name}=={version}', '-d', tmp]
            done = subprocess.run(cmd, capture_output=True, text=True)
            found = glob.glob(os.path.join(tmp, f'{name}-{version}-*.whl'))
            if done.returncode or not found:
                raise errors.DeviceError(f'sdfgsparse: could not download {name}=={version} for the FPGA '
                                         f'C-simulation headers: {(done.stderr or done.stdout).strip()[-400:]}')
            wheel = found[0]
        staging = os.path.join(tmp, 'ap_types')
        os.makedirs(staging)
        with zipfile.ZipFile(wheel) as z:
            licence = next((n for n in z.namelist() if n.endswith('.dist-info/licenses/LICENSE')), None)
            members = [n for n in z.namelist() if n.startswith(prefix) and not n.endswith('/')
                       and os.path.basename(n) not in _NOT_COPIED]
            if not any(n.endswith('/ap_int.h') for n in members):
                raise errors.DeviceError(f'sdfgsparse: {os.path.basename(wheel)} holds no {prefix}ap_int.h')
            for n in members:
                target = os.path.join(staging, n[len(prefix):])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with z.open(n) as src, open(target, 'wb') as out:
                    shutil.copyfileobj(src, out)
            if licence:
                with z.open(licence) as src, open(os.path.join(staging, f'LICENSE.{name}'), 'wb') as out:
                    shutil.copyfileobj(src, out)
        with open(os.path.join(staging, 'SOURCE'), 'w') as f:
            f.write(f'{name}=={version}: {prefix} (Xilinx HLS arbitrary precision types, Apache-2.0)\n')
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        old = dest + '.old'
        shutil.rmtree(old, ignore_errors=True)
        if os.path.isdir(dest):
            os.replace(dest, old)
        shutil.copytree(staging, dest)
        shutil.rmtree(old, ignore_errors=True)
    return dest


def compiler() -> Optional[str]:
    """The C++ compiler of the simulation: ``$CXX`` or ``g++`` on the ``PATH``; None."""
    cxx = os.environ.get('CXX')
    if cxx and shutil.which(cxx):
        return shutil.which(cxx)
    return shutil.which('g++')


def dace_include() -> str:
    import dace
    return os.path.join(os.path.dirname(dace.__file__), 'runtime', 'include')


def hlslib_include() -> str:
    import dace
    return os.path.join(os.path.dirname(dace.__file__), 'external', 'hlslib', 'include')


def require_csim(what: str) -> Tuple[str, str]:
    """``(compiler, ap_types folder)``, or :class:`~sdfgsparse.errors.DeviceError` naming
    ``what`` (the program) and what is missing."""
    with _LOCK:
        if 'found' not in _CACHE:
            _CACHE['found'] = (compiler(), ap_types_dir())
        cxx, ap = _CACHE['found']
    if cxx is None:
        raise errors.DeviceError(f'{what}: the FPGA C-simulation needs a C++17 compiler (g++ or $CXX); none found')
    if ap is None:
        raise errors.DeviceError(f'{what}: the FPGA C-simulation needs the Xilinx arbitrary precision headers '
                                 '(ap_int.h); run `python -m sdfgsparse.targets.fpga.toolchain --fetch-ap-types` '
                                 '(make venv does), or set SDFGSPARSE_AP_TYPES to a folder holding them')
    if not os.path.isfile(os.path.join(hlslib_include(), 'hlslib', 'xilinx', 'Stream.h')):
        raise errors.DeviceError(f'{what}: the dace installation has no hlslib headers ({hlslib_include()})')
    return cxx, ap


def _main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog='python -m sdfgsparse.targets.fpga.toolchain',
                                description='The FPGA C-simulation toolchain of this environment.')
    p.add_argument('--fetch-ap-types', action='store_true',
                   help='download the arbitrary precision headers (hls4ml wheel) into this environment')
    p.add_argument('--dest', help='where to put them (default: <prefix>/share/sdfgsparse/ap_types)')
    args = p.parse_args(argv)
    if args.fetch_ap_types:
        print(f'ap_types: {fetch_ap_types(args.dest)}')
        return 0
    print(f'compiler: {compiler() or "none"}\nap_types: {ap_types_dir() or "none"}\nhlslib:   {hlslib_include()}')
    return 0


if __name__ == '__main__':
    sys.exit(_main())
