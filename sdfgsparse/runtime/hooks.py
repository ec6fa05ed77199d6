"""How sparse arguments and results get into and out of DaCe's own call paths.

:func:`install` (run on ``import sdfgsparse``) wraps, once:

- ``DaceProgram.__call__``: scipy / torch sparse objects have no ``__descriptor__`` and
  their ``indices``/``data`` are NumPy views, which DaCe 1.0.2 rejects. Every call of a
  ``@dace.program`` goes through :func:`sdfgsparse.runtime.call.call_program`, which
  validates sparse arguments and passes them as argument structs (member pointers,
  zero-copy) plus the size symbols they determine; warm calls of a known signature run
  its plan's compiled binder (:mod:`sdfgsparse.runtime.plan`), found by the arguments'
  types in C (``_binder.dispatch``) when the call passes them by position; other calls go
  to DaCe unchanged.
- ``DaceProgram._get_type_annotations``: the size symbols a sparse annotation makes
  (``ss<site>_n1``: number of stored entries) belong to the annotation, so one alias
  annotating two parameters (``T = ss.CSR[...]``; ``def f(A: T, B: T)``) gave both one
  entry count, and a call with two matrices of different counts was refused. Each further
  parameter of the same annotation gets its own size symbols (:func:`sdfgsparse.formats.own_size_symbols`);
  symbols the user named (``ss.CSR.type(..., n1='NNZ')``) stay shared.
- ``CompiledSDFG._initialize_return_values`` / ``_convert_return_values``: a returned
  ``Structure`` cannot be allocated as a NumPy array. Sparse return structures are
  allocated member by member (:func:`~sdfgsparse.runtime.results.allocate_return`) and
  handed back as scipy sparse arrays; results of GPU programs are allocated in device
  memory (dense ones too: DaCe's own allocation of those needs CuPy).
- ``CompiledSDFG._construct_args``: before the arguments are built, the capacity symbols
  of data-dependent results (:mod:`sdfgsparse.runtime.capacity`) are computed from the
  argument structs.
- ``CompiledSDFG.__call__``: a call that breaks a shape rule the frontend could not
  decide while parsing (:mod:`sdfgsparse.ops.shape_checks`) raises ``ShapeError`` before
  anything runs.

Two changes of DaCe's behaviour apply to our compiled programs only (an SDFG that holds
sparse data or that sdfgsparse built: :func:`sdfgsparse.formats.is_ours`); any other
program runs as DaCe runs it:

6. ``CompiledSDFG._create_array``: DaCe 1.0.2 makes returned arrays as ``np.ndarray`` over a
   separate ``np.empty`` buffer, so every result is a NumPy *view* (``base`` is set) — and
   DaCe refuses views as arguments: a result could not be passed back into a program (a CG
   loop calling its iteration program failed). Host-memory results with C-contiguous
   strides are allocated directly (``np.empty(shape)``, no base). Upstream: none found.
13. ``CompiledSDFG.__call__``: a compiled program keeps the arguments and return arrays of
   its last call on the object (``_lastargs``, ``_return_arrays``) and hands the same return
   arrays to every call until ``clear_return_values()``; DaCe's program calls that before
   calling, outside any lock. Threads calling one program received each other's results
   (402 of 800 wrong on 8 threads). Each call holds the compiled program's lock
   (:func:`~sdfgsparse.runtime.call.lock_of`) and gets new return arrays. (Warm calls of
   a known signature do not go through here: their plans keep nothing between calls.)
   Upstream: related, spcl/dace issue 1045 and PR 2206 (no lock in DaCe's main).
"""
import numpy as np
from dace.codegen import compiled_sdfg
from dace.dtypes import StorageType
from dace.frontend.python import parser

from sdfgsparse import errors
from sdfgsparse._dace_compat import wrap
from sdfgsparse.formats import is_ours, is_sparse_desc, own_size_symbols
from sdfgsparse.ops.shape_checks import rules as shape_rules
from sdfgsparse.ops.shape_checks import violation
from sdfgsparse.runtime.call import call_program, lock_of
from sdfgsparse.runtime.capacity import PREFIX, fill_capacities
from sdfgsparse.runtime.plan import MISS, dispatch
from sdfgsparse.runtime.results import allocate_on_device, allocate_return, is_sparse_return, struct_to_python
from sdfgsparse.runtime.symexpr import compile_rules

__all__ = ['install', 'ours']


def ours(compiled) -> bool:
    """Whether the compiled program ``compiled`` is one of ours (:func:`sdfgsparse.formats.is_ours`
    of its SDFG; decided once per compiled program)."""
    hit = compiled.__dict__.get('_ss_ours')
    if hit is None:
        hit = compiled.__dict__['_ss_ours'] = is_ours(getattr(compiled, 'sdfg', None))
    return hit


def _install_program_call():

    def make(orig):

        def __call__(self, *args, **kwargs):
            if not kwargs:  # a warm call by position: its binder, found by the arguments' types in C
                warm = self.__dict__.get('_ss_warm')
                if warm:
                    result = dispatch(warm, args, MISS)
                    if result is not MISS:
                        return result
                    return call_program(self, orig, args, kwargs, tried=True)
            return call_program(self, orig, args, kwargs)

        return __call__

    wrap(parser.DaceProgram, '__call__', make)


def _install_annotations():

    def make(orig):

        def _get_type_annotations(self, given_args, given_kwargs):
            result = orig(self, given_args, given_kwargs)
            own_size_symbols(result[0])
            return result

        return _get_type_annotations

    wrap(parser.DaceProgram, '_get_type_annotations', make)


def _install_results():
    cls = compiled_sdfg.CompiledSDFG

    def make_init(orig_init):

        def _initialize_return_values(self, kwargs):
            arrays = self.sdfg.arrays
            for name, desc in arrays.items():
                if not name.startswith('__return') or desc.transient or name in kwargs:
                    continue
                sparse = is_sparse_desc(desc)
                if sparse or getattr(desc, 'storage', None) == StorageType.GPU_Global:
                    syms = {k: v for k, v in kwargs.items() if k not in arrays}
                    syms.update(self.sdfg.constants)
                    made = allocate_return(desc, syms) if sparse else allocate_on_device(desc, syms)
                    if made is not None:
                        kwargs[name] = made
                        self._create_new_arrays = True
            return orig_init(self, kwargs)

        return _initialize_return_values

    def make_convert(orig_convert):

        def _convert_return_values(self):
            res = orig_convert(self)
            if is_sparse_return(res):
                return struct_to_python(res)
            if isinstance(res, tuple):
                return tuple(struct_to_python(r) if is_sparse_return(r) else r for r in res)
            return res

        return _convert_return_values

    def make_construct(orig_construct):

        def _construct_args(self, kwargs):
            caps = self.__dict__.get('_ss_capacity_symbols')
            if caps is None:
                caps = self._ss_capacity_symbols = sorted(str(s) for s in self.sdfg.free_symbols
                                                          if str(s).startswith(PREFIX))
            if caps:
                fill_capacities(caps, kwargs)
            return orig_construct(self, kwargs)

        return _construct_args

    def make_create(orig):  # 6

        def _create_array(self, name, dtype, storage, shape, strides, total_size):
            if storage is not StorageType.GPU_Global and len(shape) > 0 and ours(self):
                item = np.dtype(dtype).itemsize
                contiguous, step = [], 1  # C-order strides in bytes (DaCe passes byte strides)
                for n in reversed(shape):
                    contiguous.append(step * item)
                    step *= n
                if tuple(reversed(contiguous)) == tuple(strides) and step == total_size:
                    return np.empty(shape, dtype=dtype)
            return orig(self, name, dtype, storage, shape, strides, total_size)

        return _create_array

    wrap(cls, '_initialize_return_values', make_init)
    wrap(cls, '_convert_return_values', make_convert)
    wrap(cls, '_construct_args', make_construct)
    wrap(cls, '_create_array', make_create)


def _install_calls():
    cls = compiled_sdfg.CompiledSDFG

    def make_locked(orig):  # 13

        def __call__(self, *args, **kwargs):
            if not ours(self):
                return orig(self, *args, **kwargs)
            with lock_of(self):
                self.clear_return_values()
                return orig(self, *args, **kwargs)

        return __call__

    def make_shapes(orig):

        def __call__(self, *args, **kwargs):
            rules = self.__dict__.get('_ss_shape_rules')
            if rules is None:
                rules = self._ss_shape_rules = compile_rules(shape_rules(self.sdfg))
            if rules:
                values = {**dict(zip(self.argnames or [], args)), **kwargs}
                broken = violation(rules, {k: v for k, v in values.items() if isinstance(v, (int, np.integer))})
                if broken is not None:
                    raise errors.ShapeError(broken)
            return orig(self, *args, **kwargs)

        return __call__

    wrap(cls, '__call__', make_locked)
    wrap(cls, '__call__', make_shapes)


def install() -> None:
    """Install the wrappers above (after ``sdfgsparse._dace_compat.apply()``, whose fixes of
    the same DaCe methods they wrap); once."""
    _install_program_call()
    _install_annotations()
    _install_results()
    _install_calls()
