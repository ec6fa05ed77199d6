"""What a call of a built program does per target: one :class:`Runtime` each.

:class:`~sdfgsparse.runtime.call.CompiledProgram` (``ss.compile``, ``ss.optimize``, the
``run`` command) holds no branch on its target: it asks its runtime to lower the SDFG
(:meth:`Runtime.lower`), to build it (:meth:`Runtime.build`), to check a call before
anything runs (:meth:`Runtime.before_call`), to bind it (:meth:`Runtime.call`: the
program's one full path, ``CompiledProgram._full_call``, with the device arrays it passes
as they are), and inside that path how its marshalled arguments reach the built program
(:meth:`Runtime.prepare`, :meth:`Runtime.invoke`). A target contributes how it lowers,
allocates and calls; the binding, checks and results are the full path's.
A new target adds a subclass here and an entry in :data:`RUNTIMES`; its code generation
lives in its folder under :mod:`sdfgsparse.targets`.

The toolchains (nvcc, the CUDA driver, the FPGA C-simulation) are imported on first use.
"""
import copy
from typing import Any, Dict, Tuple

import dace

from sdfgsparse import errors
from sdfgsparse._warnings import benign_dace_warnings
from sdfgsparse.runtime.arguments import marshal_arguments
from sdfgsparse.runtime.capacity import PREFIX as CAPACITY_PREFIX
from sdfgsparse.runtime.capacity import fill_capacities
from sdfgsparse.runtime.host_convert import convert
from sdfgsparse.runtime.outputs import call_compiled, return_names
from sdfgsparse.runtime.results import allocate_return, struct_to_python
from sdfgsparse.targets.cpu.dense_products import sparse_program_defaults

__all__ = ['Runtime', 'CPU', 'GPU', 'FPGA', 'RUNTIMES']


class Runtime:
    """The calls of programs built for one target (the CPU's, unless overridden)."""
    #: the target's name in ``ss.compile(..., target=)``
    name = 'cpu'
    #: whether a call leaves a warm plan for the next call of its signature (host arrays only)
    plans = True
    #: whether calls take ``out=`` (results written into the caller's host arrays)
    takes_out = True

    def check_options(self, design) -> None:
        """Refuse options that are not the target's (``design`` is the FPGA's)."""
        if design is not None:
            raise errors.UnsupportedOperationError(f'ss.compile: design= is for target=\'fpga\', not {self.name!r}')

    def lower(self, sdfg: dace.SDFG, design) -> Tuple[dace.SDFG, dace.SDFG]:
        """``(the program's SDFG, the SDFG that is built)``; the caller's SDFG is never changed."""
        return sdfg, sdfg

    def build(self, sdfg: dace.SDFG, lowered: dace.SDFG):
        """The compiled program. Dense products take sdfgsparse's expansions, as in
        ``@dace.program`` calls (:func:`~sdfgsparse.targets.cpu.dense_products.sparse_program_defaults`),
        on a copy: the caller's SDFG is theirs."""
        if sparse_program_defaults(lowered, apply=False):
            lowered = copy.deepcopy(lowered)
            sparse_program_defaults(lowered)
        with benign_dace_warnings():
            return lowered.compile()

    def before_call(self, sdfg: dace.SDFG, values: Dict[str, Any]) -> None:
        """Checks of a bound call that must come before anything runs."""

    def call(self, program, names, values):
        """Run ``program`` (a :class:`~sdfgsparse.runtime.call.CompiledProgram`) on the bound ``values``."""
        return program._full_call(names, values)

    def prepare(self, program, sparse: Dict[str, Any], symbols: Dict[str, int]) -> None:
        """Change the marshalled sparse arguments (``sparse``: name -> ``SparseArg``) and the
        symbols they define where the built program takes them otherwise (before the
        aliasing check)."""

    def invoke(self, program, compiled, out: Dict[str, Any], sparse: Dict[str, Any], symbols: Dict[str, int],
               values: Dict[str, Any], result_out=None):
        """Call ``compiled`` with the marshalled arguments ``out`` (name -> argument struct,
        array or value), the ``symbols`` the call determined and the caller's ``values``;
        returns the results (``result_out``: the caller's ``out=``, runtime/outputs.py)."""
        sdfg = program.sdfg
        needed = program.__dict__.get('_needed')
        if needed is None:  # the SDFG is fixed once compiled: its symbols are computed once
            needed = program._needed = set(map(str, sdfg.free_symbols)) | set(sdfg.symbols)
        for n, v in values.items():
            if n not in sdfg.arrays and n in needed:
                symbols[n] = v
        call = {k: v for k, v in out.items() if k in sdfg.arrays}
        call.update({k: v for k, v in symbols.items() if k in needed})
        result, outputs = call_compiled(f'{sdfg.name}()', compiled, call, result_out, symbols, values)
        return outputs.finish(result) if outputs is not None else result


class CPU(Runtime):
    """C++ and OpenMP through DaCe's CPU code generator."""


class GPU(Runtime):
    """CUDA: the program lowered by :func:`sdfgsparse.targets.cuda.lower.to_gpu`; array
    arguments are device arrays (a host array is an error naming it); building needs nvcc,
    a call a CUDA device."""
    name = 'gpu'
    plans = False  # (plans pass host arrays only)
    takes_out = False

    def lower(self, sdfg, design):
        from sdfgsparse.targets.cuda.lower import is_lowered, to_gpu
        if not is_lowered(sdfg):  # the caller's SDFG is theirs: lower a copy
            sdfg = to_gpu(copy.deepcopy(sdfg))
        return sdfg, sdfg

    def build(self, sdfg, lowered):
        from sdfgsparse.targets.cuda.toolchain import require_nvcc
        require_nvcc(sdfg.name)  # (not the CPU's dense expansions: those are CPU tasklets)
        with benign_dace_warnings():
            return lowered.compile()

    def before_call(self, sdfg, values):
        # without a device, DaCe 1.0.2's GPU library segfaults the process when called
        from sdfgsparse.targets.cuda.device import check_device_arguments
        from sdfgsparse.targets.cuda.toolchain import require_device
        require_device(f'{sdfg.name}()')
        check_device_arguments(f'{sdfg.name}()', values, sdfg)

    def call(self, program, names, values):
        """Device arrays pass as they are; sparse values in device memory pass as the host
        copies their checks run on, carrying their device members (the struct points at
        those); marshalling takes the host values only."""
        from sdfgsparse.runtime.device import device_sparse_value
        from sdfgsparse.targets.cuda.device import device_argument, is_device_array
        arrays = program.sdfg.arrays
        values = dict(values)
        for n, v in values.items():
            host = device_sparse_value(n, v) if n in arrays else None
            if host is not None:
                values[n] = host
        device = {n: v for n, v in values.items()
                  if n in arrays and is_device_array(v) and isinstance(arrays[n], dace.data.Array)}
        for n, v in device.items():
            device_argument(n, v, arrays[n])
        return program._full_call(names, values, device)


class FPGA(Runtime):
    """Xilinx HLS through DaCe, run as a C-simulation: the program lowered on a copy by
    :func:`sdfgsparse.targets.fpga.lower.to_fpga` (the program keeps its signature)."""
    name = 'fpga'
    plans = False
    takes_out = False

    def check_options(self, design):
        from sdfgsparse.targets.fpga.streaming import Design
        if design is not None and not isinstance(design, Design):
            raise errors.ArgumentError(f'ss.compile: design must be a sdfgsparse.targets.fpga.Design, got '
                                       f'{type(design).__name__}')

    def lower(self, sdfg, design):
        from sdfgsparse.targets.fpga.lower import to_fpga
        return sdfg, to_fpga(copy.deepcopy(sdfg), design)

    def build(self, sdfg, lowered):
        from sdfgsparse.targets.fpga.csim import compile_csim
        return compile_csim(lowered)

    def prepare(self, program, sparse, symbols):
        """Sparse arguments the lowering streams as CSR are converted here (their symbols
        with them)."""
        from sdfgsparse.targets.fpga.lower import converted_arguments
        for name, csr in converted_arguments(program.lowered).items():
            if name in sparse:
                _, more, arg, _ = marshal_arguments({name: convert(sparse[name].value, csr)}, {name: csr})
                sparse[name] = arg[name]
                symbols.update(more)

    def invoke(self, program, compiled, out, sparse, symbols, values, result_out=None):
        """Each sparse argument passed as the member arrays the lowering flattened it into;
        sparse results allocated here, their members filled by the program."""
        from sdfgsparse.targets.fpga.csim import check_error
        from sdfgsparse.targets.fpga.lower import flat_arguments
        sdfg, lowered = program.sdfg, program.lowered
        shapes = program.__dict__.get('_fpga_symbols')
        if shapes is None:  # both SDFGs are fixed: their symbols are computed once
            caps = sorted(str(c) for c in sdfg.free_symbols if str(c).startswith(CAPACITY_PREFIX))
            shapes = program._fpga_symbols = (caps, set(map(str, lowered.free_symbols)) | set(lowered.symbols))
        caps, needed = shapes
        if caps:  # data-dependent results (SpGEMM): their capacities, from the argument structs
            sized = dict(out)
            fill_capacities(caps, sized)
            symbols.update({c: sized[c] for c in caps})
        flat = flat_arguments(lowered)
        call = {}
        results = {}
        for name, members in flat.items():
            if name.startswith('__return'):
                results[name] = allocate_return(sdfg.arrays[name], symbols)
                for member, array in members.items():
                    call[array] = results[name]._ss_keepalive[member]
        for name, v in out.items():
            if name in flat and name not in results:
                for member, array in flat[name].items():
                    m = sparse[name].arrays[member]
                    call[array] = m if m.base is None else m.copy()  # (DaCe refuses views; the host copies anyway)
            elif name in lowered.arrays:
                call[name] = v
            elif name in needed:
                symbols[name] = v
        call.update({k: v for k, v in symbols.items() if k in needed})
        result = compiled(**call)
        check_error(compiled)
        if results:  # the program's results in its order: dense ones as DaCe returns them
            dense = list(result) if isinstance(result, tuple) else [] if result is None else [result]
            whole = [struct_to_python(results[n]) if n in results else dense.pop(0) for n in return_names(sdfg)]
            result = whole[0] if len(whole) == 1 else tuple(whole)
        return result


#: The runtime of each target, by its name in ``ss.compile(..., target=)``.
RUNTIMES: Dict[str, Runtime] = {r.name: r for r in (CPU(), GPU(), FPGA())}
