"""Every patch sdfgsparse applies to DaCe, with its reason and the DaCe version it is for.

All patches are for DaCe 1.0.2 and are applied once, on import of ``sdfgsparse``.

1. ``DaceProgram.__call__`` (1.0.2): scipy / torch sparse objects have no
   ``__descriptor__`` and their ``indices``/``data`` are NumPy views, which DaCe rejects.
   The wrapper validates sparse arguments and passes them as argument structs (member
   pointers, zero-copy) plus the size symbols they determine; other calls are untouched.
   Warm calls of a known signature run its plan (:mod:`sdfgsparse.runtime.plan`), which
   calls the compiled function itself, bypassing ``CompiledSDFG.__call__``.
2. ``CompiledSDFG._initialize_return_values`` / ``_convert_return_values`` (1.0.2): a
   returned ``Structure`` cannot be allocated as a NumPy array. Sparse return structures
   are allocated member by member and handed back as scipy sparse arrays. Also, 1.0.2
   orders tuple results by *string* name (``__return_10`` before ``__return_2``), which
   scrambles programs returning more than ten values; results are put back in order.
   Before the arguments are built, capacity symbols of data-dependent results
   (:mod:`sdfgsparse.runtime.capacity`) are computed from the argument structs.
3. ``SDFG.replace_dict`` (1.0.2): renaming a structure (the frontend renames a returned
   transient to ``__return``) leaves memlets on its members (``X.vals``) pointing at the
   old name. The patch adds ``old.member -> new.member`` for every member.
4. ``Structure.from_json`` (1.0.2): symbolic members (our ``rows`` / ``cols``) come back
   from JSON as strings, which breaks ``free_symbols``; they are parsed back to symbols.
6. ``CompiledSDFG._create_array`` (1.0.2): returned arrays are made as ``np.ndarray`` over a
   separate ``np.empty`` buffer, so every result is a NumPy *view* (``base`` is set) — and
   DaCe refuses views as arguments: a result cannot be passed back into a program (a CG
   loop calling its iteration program fails). Host-memory arrays with C-contiguous
   strides are now allocated directly (``np.empty(shape)``, no base); others as before.
5. Default cache (1.0.2): ``compiler.use_cache`` keys builds by program name, so two
   programs with the same name overwrite each other's build. We set ``cache = 'hash'``
   (unless the user chose a policy through ``DACE_cache``).
"""
import os

import dace
import numpy as np
from dace.codegen import compiled_sdfg
from dace.frontend.python import parser

__all__ = ['apply']

_applied = {'done': False}
_call_program = [None]  # imported on the first call (the runtime imports DaCe's frontend)


def _patch_call():
    orig = parser.DaceProgram.__call__
    if getattr(orig, '_sdfgsparse', False):
        return

    def __call__(self, *args, **kwargs):
        call = _call_program[0]
        if call is None:
            from sdfgsparse.runtime.call import call_program
            call = _call_program[0] = call_program
        return call(self, orig, args, kwargs)

    __call__._sdfgsparse = True
    __call__.__doc__ = orig.__doc__
    parser.DaceProgram.__call__ = __call__


def _patch_returns():
    cls = compiled_sdfg.CompiledSDFG
    orig_init = cls._initialize_return_values
    orig_convert = cls._convert_return_values
    if getattr(orig_init, '_sdfgsparse', False):
        return

    def _initialize_return_values(self, kwargs):
        from sdfgsparse.formats import is_sparse_desc
        from sdfgsparse.runtime.results import allocate_return
        arrays = self.sdfg.arrays
        for name, desc in arrays.items():
            if name.startswith('__return') and not desc.transient and is_sparse_desc(desc) and name not in kwargs:
                syms = {k: v for k, v in kwargs.items() if k not in arrays}
                syms.update(self.sdfg.constants)
                kwargs[name] = allocate_return(desc, syms)
                self._create_new_arrays = True
        return orig_init(self, kwargs)

    def _convert_return_values(self):
        from sdfgsparse.runtime.results import is_sparse_return, struct_to_python
        res = orig_convert(self)
        if is_sparse_return(res):
            return struct_to_python(res)
        if isinstance(res, tuple):
            names = [d[0] for d in self._retarray_shapes]
            if len(names) == len(res) and all(n.startswith('__return_') for n in names):
                res = tuple(r for _, r in sorted(zip(names, res), key=lambda t: int(t[0][len('__return_'):])))
            return tuple(struct_to_python(r) if is_sparse_return(r) else r for r in res)
        return res

    orig_construct = cls._construct_args

    def _construct_args(self, kwargs):
        caps = getattr(self, '_ss_capacity_symbols', None)
        if caps is None:
            from sdfgsparse.runtime.capacity import PREFIX
            caps = sorted(str(s) for s in self.sdfg.free_symbols if str(s).startswith(PREFIX))
            self._ss_capacity_symbols = caps
        if caps:
            from sdfgsparse.runtime.capacity import fill_capacities
            fill_capacities(caps, kwargs)
        return orig_construct(self, kwargs)

    cls._construct_args = _construct_args
    _initialize_return_values._sdfgsparse = True
    cls._initialize_return_values = _initialize_return_values
    cls._convert_return_values = _convert_return_values


def _patch_replace_dict():
    orig = dace.SDFG.replace_dict
    if getattr(orig, '_sdfgsparse', False):
        return

    def replace_dict(self, repldict, *args, **kwargs):
        extra = {}
        for old, new in repldict.items():
            desc = self.arrays.get(old) if isinstance(old, str) else None
            if isinstance(desc, dace.data.Structure) and isinstance(new, str):
                extra.update({f'{old}.{m}': f'{new}.{m}' for m in desc.keys()})
        if extra:
            repldict = {**extra, **repldict}
        return orig(self, repldict, *args, **kwargs)

    replace_dict._sdfgsparse = True
    replace_dict.__doc__ = orig.__doc__
    dace.SDFG.replace_dict = replace_dict


def _patch_structure_json():
    orig = dace.data.Structure.__dict__['from_json']
    func = orig.__func__ if isinstance(orig, staticmethod) else orig
    if getattr(func, '_sdfgsparse', False):
        return

    def from_json(json_obj, context=None):
        ret = func(json_obj, context)
        for k, v in list(ret.members.items()):
            if isinstance(v, str):
                ret.members[k] = dace.symbolic.pystr_to_symbolic(v)
        return ret

    from_json._sdfgsparse = True
    dace.data.Structure.from_json = staticmethod(from_json)


def _patch_return_arrays():
    orig = compiled_sdfg.CompiledSDFG._create_array

    def _create_array(self, name, dtype, storage, shape, strides, total_size):
        if storage is not dace.dtypes.StorageType.GPU_Global and len(shape) > 0:
            item = np.dtype(dtype).itemsize
            contiguous, step = [], 1  # C-order strides in bytes (DaCe passes byte strides)
            for n in reversed(shape):
                contiguous.append(step * item)
                step *= n
            if tuple(reversed(contiguous)) == tuple(strides) and step == total_size:
                return np.empty(shape, dtype=dtype)
        return orig(self, name, dtype, storage, shape, strides, total_size)

    compiled_sdfg.CompiledSDFG._create_array = _create_array


_FINGERPRINT = []


def source_fingerprint() -> str:
    """A short hash of every ``.py`` file of sdfgsparse and its transformations."""
    if not _FINGERPRINT:
        import hashlib
        import pathlib
        pkg = pathlib.Path(__file__).resolve().parent
        h = hashlib.sha256()
        for root in (pkg, pkg.parent / 'transformations'):
            for f in sorted(root.rglob('*.py')) if root.is_dir() else ():
                h.update(f.relative_to(root).as_posix().encode())
                h.update(f.read_bytes())
        _FINGERPRINT.append(h.hexdigest()[:12])
    return _FINGERPRINT[0]


def _patch_build_folder():
    prop = dace.SDFG.build_folder
    if getattr(prop.fget, '_sdfgsparse', False):
        return

    def build_folder(self):
        folder = prop.fget(self)
        if '_build_folder' not in self.__dict__ and dace.Config.get('cache') == 'hash':
            folder = f'{folder}_ss{source_fingerprint()}'
        return folder

    build_folder._sdfgsparse = True
    build_folder.__doc__ = prop.fget.__doc__
    dace.SDFG.build_folder = property(build_folder, prop.fset)


def apply():
    if _applied['done']:
        return
    if 'DACE_cache' not in os.environ:
        dace.Config.set('cache', value='hash')
    if 'DACE_compiler_build_type' not in os.environ:
        dace.Config.set('compiler', 'build_type', value='Release')
    _patch_call()
    _patch_returns()
    _patch_replace_dict()
    _patch_structure_json()
    _patch_return_arrays()
    _patch_build_folder()
    _applied['done'] = True
