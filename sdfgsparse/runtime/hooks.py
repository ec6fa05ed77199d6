"""How sparse arguments and results get into and out of DaCe's own call paths.

:func:`install` (run on ``import sdfgsparse``) wraps, once:

- ``DaceProgram.__call__``: scipy / torch sparse objects have no ``__descriptor__`` and
  their ``indices``/``data`` are NumPy views, which DaCe 1.0.2 rejects. Every call of a
  ``@dace.program`` goes through :func:`sdfgsparse.runtime.call.call_program`, which
  validates sparse arguments and passes them as argument structs (member pointers,
  zero-copy) plus the size symbols they determine; warm calls of a known signature run
  its plan (:mod:`sdfgsparse.runtime.plan`), calling the compiled function itself; other
  calls go to DaCe unchanged.
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
"""
import numpy as np
from dace.codegen import compiled_sdfg
from dace.dtypes import StorageType
from dace.frontend.python import parser

from sdfgsparse import errors
from sdfgsparse.formats import is_sparse_desc, own_size_symbols
from sdfgsparse.ops.shape_checks import rules as shape_rules
from sdfgsparse.ops.shape_checks import violation
from sdfgsparse.runtime.call import call_program
from sdfgsparse.runtime.capacity import PREFIX, fill_capacities
from sdfgsparse.runtime.results import allocate_on_device, allocate_return, is_sparse_return, struct_to_python
from sdfgsparse.runtime.symexpr import compile_rules

__all__ = ['install']


def _install_program_call():
    orig = parser.DaceProgram.__call__
    if getattr(orig, '_sdfgsparse', False):
        return

    def __call__(self, *args, **kwargs):
        return call_program(self, orig, args, kwargs)

    __call__._sdfgsparse = True
    __call__.__doc__ = orig.__doc__
    __call__.__wrapped__ = orig
    parser.DaceProgram.__call__ = __call__


def _install_annotations():
    orig = parser.DaceProgram._get_type_annotations
    if getattr(orig, '_sdfgsparse', False):
        return

    def _get_type_annotations(self, given_args, given_kwargs):
        result = orig(self, given_args, given_kwargs)
        own_size_symbols(result[0])
        return result

    _get_type_annotations._sdfgsparse = True
    _get_type_annotations.__doc__ = orig.__doc__
    _get_type_annotations.__wrapped__ = orig
    parser.DaceProgram._get_type_annotations = _get_type_annotations


def _install_results():
    cls = compiled_sdfg.CompiledSDFG
    orig_init, orig_convert, orig_construct = (cls._initialize_return_values, cls._convert_return_values,
                                               cls._construct_args)
    if getattr(orig_init, '_sdfgsparse', False):
        return

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

    def _convert_return_values(self):
        res = orig_convert(self)
        if is_sparse_return(res):
            return struct_to_python(res)
        if isinstance(res, tuple):
            return tuple(struct_to_python(r) if is_sparse_return(r) else r for r in res)
        return res

    def _construct_args(self, kwargs):
        caps = self.__dict__.get('_ss_capacity_symbols')
        if caps is None:
            caps = self._ss_capacity_symbols = sorted(str(s) for s in self.sdfg.free_symbols
                                                      if str(s).startswith(PREFIX))
        if caps:
            fill_capacities(caps, kwargs)
        return orig_construct(self, kwargs)

    for new, old in ((_initialize_return_values, orig_init), (_convert_return_values, orig_convert),
                     (_construct_args, orig_construct)):
        new._sdfgsparse = True
        new.__doc__ = old.__doc__
        new.__wrapped__ = old
    cls._initialize_return_values = _initialize_return_values
    cls._convert_return_values = _convert_return_values
    cls._construct_args = _construct_args


def _install_shape_rules():
    cls = compiled_sdfg.CompiledSDFG
    orig = cls.__call__
    if getattr(orig, '_sdfgsparse_shapes', False):
        return

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

    __call__._sdfgsparse_shapes = True
    __call__.__doc__ = orig.__doc__
    __call__.__wrapped__ = orig
    cls.__call__ = __call__


def install() -> None:
    """Install the wrappers above (after ``sdfgsparse._dace_compat.apply()``, whose fixes of
    the same DaCe methods they wrap); once."""
    _install_program_call()
    _install_annotations()
    _install_results()
    _install_shape_rules()
