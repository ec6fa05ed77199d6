"""Build an FPGA SDFG as a C-simulation and load it.

What Vitis's C simulation does, without Vitis: DaCe's Xilinx code generator writes the
host code, the frame and one device source per kernel (HLS C++ with its pragmas); all of
it is compiled with g++ in hlslib's simulation mode (``hlslib::Stream`` a thread-safe
FIFO, each dataflow function a thread, ``ap_int`` the open arbitrary-precision types) and
linked into one library that DaCe's own loader calls like any program. The host side,
which DaCe writes against hlslib's OpenCL wrapper (it needs the OpenCL and Xilinx runtime
headers even to simulate), is compiled against ``csim_include/hlslib/xilinx/OpenCL.h``
instead: buffers in host memory, each kernel launched on its own thread, a kernel's error
recorded for :func:`check_error` (hlslib's own simulation drops it).

It shows whether the design computes the right result, including its streams and
dataflow; it cannot show timing closure, achieved clocks, initiation intervals or
resources (see the model of the FPGA issue for those).

Builds are cached like DaCe's (the SDFG's content-named build folder, its lock, the
build record and warm loads of :mod:`sdfgsparse.build.cache`).
"""
import copy
import ctypes
import glob
import os
import shlex
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List

import dace

from sdfgsparse import errors
from sdfgsparse.build import cache as buildcache
from sdfgsparse.build.lock import FileLock
from sdfgsparse.targets.fpga import pumping, toolchain

__all__ = ['compile_csim', 'check_error', 'SimulationNotice', 'CXXFLAGS']

HERE = os.path.dirname(os.path.abspath(__file__))
#: Flags of every translation unit (device units add ``-DDACE_XILINX_DEVICE_CODE``).
CXXFLAGS = ['-std=c++17', '-O2', '-fPIC', '-pthread', '-w', '-DDACE_XILINX', '-DHLSLIB_SIMULATE_OPENCL']
_NOTICE = {'shown': False}
_NOTICE_LOCK = threading.Lock()


class SimulationNotice(UserWarning):
    """An FPGA program runs as a C-simulation (shown once per process)."""


def _notice(name: str) -> None:
    with _NOTICE_LOCK:
        if _NOTICE['shown']:
            return
        _NOTICE['shown'] = True
    errors.warn_user(f'sdfgsparse: no FPGA is attached; {name} and later FPGA programs run as a C-simulation '
                     '(the generated HLS code compiled with g++, functionally exact, untimed)', SimulationNotice)


def _units(folder: str) -> List[str]:
    srcs = sorted(glob.glob(os.path.join(folder, 'src', 'cpu', '*.cpp')))
    srcs += sorted(glob.glob(os.path.join(folder, 'src', 'xilinx', 'host', '*.cpp')))
    srcs += sorted(glob.glob(os.path.join(folder, 'src', 'xilinx', 'device', '*.cpp')))
    return srcs


def _compile_unit(cxx: str, flags: List[str], src: str, obj: str) -> None:
    cmd = [cxx] + flags + (['-DDACE_XILINX_DEVICE_CODE'] if f'{os.sep}device{os.sep}' in src else []) + \
        ['-c', src, '-o', obj]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise errors.DeviceError(f'FPGA C-simulation: {os.path.relpath(src)} does not compile:\n'
                                 f'{shlex.join(cmd)}\n{done.stderr[-4000:]}')


def _build(sdfg: dace.SDFG, folder: str, cxx: str, ap_types: str) -> str:
    """Generate the code of ``sdfg`` into ``folder`` and link its simulation library;
    returns the library's path."""
    from dace.codegen import codegen, compiler
    sdfg = copy.deepcopy(sdfg)  # code generation changes the SDFG (and so its content-named folder)
    sdfg.build_folder = folder
    sdfg.fill_scope_connectors()
    # one function per nested SDFG: DaCe otherwise defines a function shared by equal
    # nested SDFGs (the gearboxes of two pumped kernels) in one kernel's source only, which
    # the other kernels' sources (compiled apart for an FPGA, too) do not see
    from sdfgsparse.targets.fpga.lower import quiet
    with quiet(), dace.config.set_temporary('compiler', 'unique_functions', value='none'):
        objects = codegen.generate_code(sdfg)
    compiler.generate_program_folder(sdfg, objects, folder)
    pumping.patch_pumped_host(folder)  # DaCe 1.0.2 does not launch multi-pumped kernels (pumping.py)
    build = os.path.join(folder, 'build')
    os.makedirs(build, exist_ok=True)
    flags = CXXFLAGS + [
        f'-DDACE_BINARY_DIR="{build}"', f'-I{os.path.join(HERE, "csim_include")}', f'-I{toolchain.dace_include()}',
        f'-I{toolchain.hlslib_include()}', f'-I{ap_types}', f'-I{os.path.join(folder, "include")}'
    ]
    units = _units(folder) + [os.path.join(HERE, 'csim_runtime.cpp')]
    objs = [os.path.join(build, f'{i}_{os.path.basename(u)}.o') for i, u in enumerate(units)]
    with ThreadPoolExecutor(max_workers=max(1, min(len(units), os.cpu_count() or 1))) as pool:
        for f in [pool.submit(_compile_unit, cxx, flags, u, o) for u, o in zip(units, objs)]:
            f.result()
    ext = dace.Config.get('compiler', 'library_extension')
    library = os.path.join(build, f'lib{sdfg.name}.{ext}')
    stub = os.path.join(build, f'libdacestub_{sdfg.name}.{ext}')
    stub_src = os.path.join(os.path.dirname(dace.__file__), 'codegen', 'tools', 'dacestub.cpp')
    for cmd in ([cxx, '-shared', '-pthread', '-o', library] + objs,
                [cxx, '-std=c++14', '-shared', '-fPIC', '-fopenmp', '-o', stub, stub_src, '-ldl']):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise errors.DeviceError(f'FPGA C-simulation: linking failed:\n{shlex.join(cmd)}\n{done.stderr[-4000:]}')
    return library


def compile_csim(sdfg: dace.SDFG):
    """The loaded C-simulation of the lowered FPGA SDFG ``sdfg`` (a DaCe
    ``CompiledSDFG``): built into its build folder, or loaded from a complete build."""
    from dace.codegen import compiler

    cxx, ap_types = toolchain.require_csim(sdfg.name)
    _notice(sdfg.name)
    folder = os.path.abspath(sdfg.build_folder)
    lock = FileLock(folder + '.lock')
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    lock.acquire()
    try:
        result = buildcache.load_complete(sdfg, folder)
        if result is None:
            result = buildcache.build(folder,
                                      lambda: compiler.get_program_handle(_build(sdfg, folder, cxx, ap_types), sdfg))
        os.utime(folder, None)
        return result
    finally:
        lock.release()


def check_error(compiled) -> None:
    """Raise :class:`~sdfgsparse.errors.DeviceError` with the first error a simulated
    kernel of ``compiled`` raised during the last call (clearing it), if any."""
    raw = compiled._lib.get_symbol('sdfgsparse_csim_error', ctypes.c_int)
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_int)(ctypes.cast(raw, ctypes.c_void_p).value)
    buf = ctypes.create_string_buffer(2048)
    if fn(buf, len(buf)):
        raise errors.DeviceError(f'{compiled.sdfg.name} (FPGA C-simulation): {buf.value.decode(errors="replace")}')

