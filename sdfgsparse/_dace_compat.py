"""Fixes of DaCe 1.0.2 bugs, each with its reason and the DaCe source it fixes, and
:func:`wrap`, the one way sdfgsparse replaces an attribute of DaCe.

The fixes are for DaCe :data:`DACE_VERSION` and are applied once, on import of
``sdfgsparse`` (:func:`apply`), only on that version (another version gets a warning and
DaCe as it is). Each keeps DaCe's own function as ``__wrapped__``, and
``tests/runtime/test_dace_compat.py`` shows each bug on stock DaCe (the wrapped function)
and its fix. None changes what a correct dense program does: its generated code, flags and
results stay DaCe's (``tests/runtime/test_dense_programs_unchanged.py`` compares them with
and without ``import sdfgsparse``). This module imports nothing of sdfgsparse's.

The numbers are stable names (other modules cite them); the missing ones are sdfgsparse's
own integration and live with their owners, applied only to SDFGs that hold sparse data or
that sdfgsparse built (:func:`sdfgsparse.formats.is_ours`): the ``@dace.program`` call and
sparse results (1, and 2's sparse part), returned arrays that are not views (6) and the
compiled program's lock (13) in :mod:`sdfgsparse.runtime.hooks`; the build policy (5, 11:
no ``-ffast-math``) and the content-named build folders (7, 8, 9) in
:mod:`sdfgsparse.build`; the CUDA 13 build (14) in :mod:`sdfgsparse.targets.cuda.compat`;
the sparse ``GPUTransformSDFG`` (16) in :mod:`sdfgsparse.targets.cuda.lower`; the SDFG's
``sparse_notes`` (21) in :mod:`sdfgsparse.notes`; NaN-propagating ``np.maximum`` /
``np.minimum`` (23) in :mod:`sdfgsparse.frontends.numpy`.

2. ``CompiledSDFG._convert_return_values`` (1.0.2, ``dace/codegen/compiled_sdfg.py``): tuple
   results are ordered by *string* name (``__return_10`` before ``__return_2``), which
   scrambles programs returning more than ten values; results are put back in order.
   Upstream: spcl/dace PR 2430 (open) orders the results by their number.
3. ``SDFG.replace_dict`` (1.0.2, ``dace/sdfg/sdfg.py``): renaming a structure (the frontend
   renames a returned transient to ``__return``) leaves memlets on its members (``X.vals``)
   pointing at the old name. The patch adds ``old.member -> new.member`` for every member.
   Upstream: related, spcl/dace PR 2121 renames a returned structure with its members in the frontend.
4. ``Structure.from_json`` (1.0.2, ``dace/data.py``): symbolic members (our ``rows`` /
   ``cols``) come back from JSON as strings, which breaks ``free_symbols``; they are parsed
   back to symbols.
   Upstream: none found (main unchanged).
10. ``DaCeCodeGenerator.generate_fileheader`` (1.0.2, ``dace/codegen/targets/framecode.py``):
   the custom type definitions (our argument structs) are written in the iteration order of a
   ``set`` of typeclasses, whose hashes hold string hashes, which Python randomises per
   process. A program with two sparse types (``A.T @ B``: a CSR struct and a CSC view) got its
   structs in either order, so a second process rewrote the source and ``make`` rebuilt the
   library of an unchanged program (warm cache 2.3-2.7 s instead of ~1 s, about every other
   process). While the header is generated, that module's ``set`` iterates in a sorted order
   (by the type's C name), the same in every process.
   Upstream: none found (main still iterates a set).
12. ``SDFGState.add_nested_sdfg`` (1.0.2, ``dace/sdfg/state.py``): a symbol gets its C type
   from the first object that names it, and ``dace.symbol('N')`` is int32, so a nested SDFG's
   symbol stayed int32 where its parent passed an int64 value (the column count of an
   int64-index matrix with more than 2**32 columns reached the kernels cut to 32 bits).
   ``add_nested_sdfg`` (used by every library expansion, during code generation) gives a nested
   SDFG's integer symbol the parent's width where the parent passes an int64 value. (The
   symbols of int64-index sparse structures themselves are widened before a build by
   :mod:`sdfgsparse.build.folder`.)
   Upstream: related, spcl/dace PR 2576 (types of nested symbols); int32/int64 clashes in issues 2374, 2605.
15. ``CPUCodeGen.allocate_array`` / ``deallocate_array`` (1.0.2,
   ``dace/codegen/targets/cpu.py``): a transient structure (an intermediate sparse result, ``(A
   + B) @ x``) was allocated with ``new`` and its members with ``new[]`` whatever their
   storage, and freed with ``delete[]`` on the struct alone: every call leaked the members
   (``nnz`` values and indices of every intermediate sparse result) and freed the struct with
   the wrong operator; and a member in GPU memory could not be allocated at all ("Unimplemented
   storage type GPU_Global"), so no GPU program could hold an intermediate sparse result.
   Members of transient structures are now allocated and freed by the code generator of their
   storage (``cudaMalloc`` / ``cudaFree`` for ``GPU_Global``), and the struct with ``delete``.
   Upstream: partly, spcl/dace PR 1971 (the struct freed with delete); the members are not.
17. ``ProgramVisitor.parse_program`` (1.0.2, ``dace/frontend/python/newast.py``): at the end of
   parsing, the frontend renames each transient to the Python name it was assigned to, one
   ``SDFG.replace_dict`` per variable, each of which walks every node, memlet and tasklet of
   the program: parse time grew with (variables x program size); the 4-layer attention model of
   ``ss.torch.compile`` (64 assignments) spent 40 % of its parse there. The renames of that
   loop are now collected and applied in one ``replace_dict`` just before the frontend's next
   step (``propagate_states``); where a new name is also an old one (the order would matter)
   they are applied one by one as before. The SDFG is the same.
   Upstream: none found (main renames one variable at a time).
18. ``dace.sdfg.state._getdebuginfo`` (1.0.2, ``dace/sdfg/state.py``): every node added to a
   state without debug information records its caller's file and line through
   ``inspect.stack()``, which builds the whole call stack and reads a source line of every
   frame of it (module lookups, file reads), a visible part of parsing and of expanding library
   nodes. The patch reads the same frame with ``sys._getframe``; the recorded file and line are
   the same.
   Upstream: related, spcl/dace PR 2321 (a setting turns the line lookup off; default unchanged).
19. ``DaCeCodeGenerator.free_symbols`` (1.0.2, ``dace/codegen/targets/framecode.py``): the code
   generator caches the symbols an object uses by ``id(obj)``, and the FPGA code generator asks
   it for each processing element's subgraph, a ``SubgraphView`` made for the question and
   freed after it. A later subgraph allocated at the same address got the freed one's symbols:
   a kernel's processing element missed a symbol its loop bounds use (``'K' was not declared``,
   or a wrong bound), depending on the hash seed. The cache now keeps the object with its
   symbols and answers only for that same object (an id is not reused while the object is
   alive).
   Upstream: none found (main caches by id).
20. ``dace.codegen.targets.fpga.is_external_stream`` (1.0.2, ``dace/codegen/targets/fpga.py``;
   added with TemporalVectorization, spcl/dace PR 1131): it decides whether a stream leaves a
   processing element (so that the FPGA code generator makes it a kernel port rather than a
   FIFO local to the module) by looking in the PE for another access node whose *descriptor
   compares equal*, and ``Data.__eq__`` is structural. Two different streams of the same type
   and depth in one PE ("xv_s" and "vb_s" feeding a multi-pumped PE) hid each other: the stream
   to the pumped kernel was declared inside its producer's module and the program deadlocked
   (prototype workaround: distinct depths). The other end is now looked for by identity:
   another access node (``is not``) of the same container (same name, same descriptor object).
   Designs whose streams differ in type or depth are unchanged.
   Upstream: none found (also in spcl/dace-fpga).
22. DaCe transformations that corrupt sparse SDFGs (1.0.2, ``dace/transformation/``):
   ``NestSDFG`` (and ``FPGATransformSDFG`` and ``FPGATransformState``, which nest the program
   first) give the nested SDFG no descriptor for a structure's members (memlets on ``A.pos1``
   then name no array: the result does not validate, and the VS Code backend fails on every
   later request until undo); ``RedundantArrayCopying`` removes a copy between views of a
   structure's members and leaves a view with two incoming edges. Their ``can_be_applied`` now
   refuses programs holding structures (the first three; :func:`sdfgsparse.optimize`
   with ``target='fpga'`` is the FPGA path for them) and matches touching a structure, a
   structure member or a view of one (the last); everything else goes to DaCe's own check.
   (``GPUTransformSDFG``: :mod:`sdfgsparse.targets.cuda.lower`.)
   Upstream: related, spcl/dace PR 1888 (InlineSDFG with structures; NestSDFG unchanged).
"""

import inspect
import sys
import warnings

import dace
from dace.codegen import compiled_sdfg

__all__ = ['apply', 'wrap', 'wrapped', 'DACE_VERSION']

#: The DaCe release these fixes are for (and the one sdfgsparse pins).
DACE_VERSION = '1.0.2'

_applied = {'done': False}

#: Every DaCe attribute sdfgsparse replaced: ``(owner, name, key)`` in the order of :func:`wrap`.
_WRAPPED = []


def wrap(owner, name, make, key: str = None):
    """Replace ``owner.name`` (a function, method, static or class method or property of a
    DaCe class or module) by ``make(orig)``, where ``orig`` is the function now there (a
    property's getter, a static or class method's function); once per ``key`` (by default ``make``'s qualified
    name): the new function is marked with it, keeps ``orig`` as ``__wrapped__`` (so
    ``inspect.unwrap`` gives DaCe's own) and its docstring where it has none. Returns the
    new function, or None where this key's wrapper is already in place."""
    current = inspect.getattr_static(owner, name)
    func = current.__func__ if isinstance(current, (staticmethod, classmethod)) else \
        current.fget if isinstance(current, property) else current
    key = key or f'{make.__module__}.{make.__qualname__}'
    probe = func
    while probe is not None:
        if getattr(probe, '_sdfgsparse', None) == key:
            return None
        probe = getattr(probe, '__wrapped__', None)
    new = make(func)
    new._sdfgsparse = key
    new.__wrapped__ = func
    if not new.__doc__:
        new.__doc__ = func.__doc__
    if isinstance(current, (staticmethod, classmethod)):
        setattr(owner, name, type(current)(new))
    elif isinstance(current, property):
        setattr(owner, name, property(new, current.fset, current.fdel, current.__doc__))
    else:
        setattr(owner, name, new)
    _WRAPPED.append((owner, name, key))
    return new


def wrapped() -> list:
    """``(owner, name, key)`` of every DaCe attribute :func:`wrap` replaced so far."""
    return list(_WRAPPED)


# ---------------------------------------------------------------------- patch 2
def _patch_return_order():

    def make(orig):

        def _convert_return_values(self):
            res = orig(self)
            if isinstance(res, tuple):
                names = [d[0] for d in self._retarray_shapes]
                if len(names) == len(res) and all(n.startswith('__return_') for n in names):
                    res = tuple(r for _, r in sorted(zip(names, res), key=lambda t: int(t[0][len('__return_'):])))
            return res

        return _convert_return_values

    wrap(compiled_sdfg.CompiledSDFG, '_convert_return_values', make)


# ---------------------------------------------------------------------- patch 3
def _patch_replace_dict():

    def make(orig):

        def replace_dict(self, repldict, *args, **kwargs):
            extra = {}
            for old, new in repldict.items():
                desc = self.arrays.get(old) if isinstance(old, str) else None
                if isinstance(desc, dace.data.Structure) and isinstance(new, str):
                    extra.update({f'{old}.{m}': f'{new}.{m}' for m in desc.keys()})
            if extra:
                repldict = {**extra, **repldict}
            return orig(self, repldict, *args, **kwargs)

        return replace_dict

    wrap(dace.SDFG, 'replace_dict', make)


# ---------------------------------------------------------------------- patch 4
def _patch_structure_json():

    def make(orig):

        def from_json(json_obj, context=None):
            ret = orig(json_obj, context)
            for k, v in list(ret.members.items()):
                if isinstance(v, str):
                    ret.members[k] = dace.symbolic.pystr_to_symbolic(v)
            return ret

        return from_json

    wrap(dace.data.Structure, 'from_json', make)


# ---------------------------------------------------------------------- patch 10
class _SortedSet(set):
    """A ``set`` that iterates in an order independent of hashing (patch 10)."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self), key=lambda t: (str(t), repr(t))))


def _patch_fileheader_order():
    from dace.codegen.targets import framecode

    def make(orig):

        def generate_fileheader(self, *args, **kwargs):
            had = 'set' in framecode.__dict__
            framecode.set = _SortedSet
            try:
                return orig(self, *args, **kwargs)
            finally:
                if not had:
                    del framecode.set

        return generate_fileheader

    wrap(framecode.DaCeCodeGenerator, 'generate_fileheader', make)


# ---------------------------------------------------------------------- patch 12
def _patch_nested_symbol_types():
    from dace.sdfg.state import SDFGState
    from dace.codegen.tools.type_inference import infer_expr_type

    def make(orig):

        def add_nested_sdfg(self, sdfg, *args, **kwargs):
            node = orig(self, sdfg, *args, **kwargs)
            inner = node.sdfg
            for sym, value in node.symbol_mapping.items():
                if inner.symbols.get(str(sym)) not in (dace.int8, dace.int16, dace.int32):
                    continue  # (absent, or int64 already, or not an integer)
                if infer_expr_type(value, self.sdfg.symbols) == dace.int64:
                    inner.symbols[str(sym)] = dace.int64
            return node

        return add_nested_sdfg

    wrap(SDFGState, 'add_nested_sdfg', make)


# ---------------------------------------------------------------------- patch 15
def _struct_members(desc):
    """The array members of a structure (scalar members live inside the struct)."""
    return [(k, v) for k, v in desc.members.items() if isinstance(v, dace.data.Array)]


def _owned_structure(sdfg, node, desc) -> bool:
    """Whether ``node`` is a transient structure that its SDFG allocates (patch 15)."""
    return (isinstance(desc, dace.data.Structure) and not isinstance(desc, dace.data.StructureView)
            and '.' not in node.data and desc.transient)


def _patch_structure_allocation():
    from dace import dtypes
    from dace.codegen.dispatcher import DefinedType
    from dace.codegen.targets import cpp
    from dace.codegen.targets.cpu import CPUCodeGen
    from dace.sdfg import nodes
    host = (dtypes.StorageType.Default, dtypes.StorageType.CPU_Heap)

    def make_alloc(orig_alloc):

        def allocate_array(self, sdfg, cfg, dfg, state_id, node, nodedesc, function_stream, declaration_stream,
                           allocation_stream, allocate_nested_data=True):
            if not (allocate_nested_data and _owned_structure(sdfg, node, nodedesc)):
                return orig_alloc(self, sdfg, cfg, dfg, state_id, node, nodedesc, function_stream,
                                  declaration_stream, allocation_stream, allocate_nested_data)
            name = cpp.ptr(node.data, nodedesc, sdfg, self._frame)
            if self._dispatcher.defined_vars.has(name):
                return
            orig_alloc(self, sdfg, cfg, dfg, state_id, node, nodedesc, function_stream, declaration_stream,
                       allocation_stream, allocate_nested_data=False)  # the struct itself
            for k, v in nodedesc.members.items():
                if not isinstance(v, dace.data.Data):
                    continue
                ctype = dtypes.pointer(v.dtype).ctype if isinstance(v, dace.data.Array) else v.dtype.ctype
                kind = DefinedType.Scalar if isinstance(v, dace.data.Scalar) else DefinedType.Pointer
                self._dispatcher.declared_arrays.add(f'{name}->{k}', kind, ctype)
                if isinstance(v, dace.data.Scalar):
                    self._dispatcher.defined_vars.add(f'{name}->{k}', kind, ctype)
                    continue
                member = nodes.AccessNode(f'{node.data}.{k}')
                if v.storage in host:
                    orig_alloc(self, sdfg, cfg, dfg, state_id, member, v, function_stream, declaration_stream,
                               allocation_stream)
                else:
                    self._dispatcher.get_array_dispatcher(v.storage).allocate_array(
                        sdfg, cfg, dfg, state_id, member, v, function_stream, declaration_stream, allocation_stream)

        return allocate_array

    def make_free(orig_free):

        def deallocate_array(self, sdfg, cfg, dfg, state_id, node, nodedesc, function_stream, callsite_stream):
            if not _owned_structure(sdfg, node, nodedesc):
                return orig_free(self, sdfg, cfg, dfg, state_id, node, nodedesc, function_stream, callsite_stream)
            name = cpp.ptr(node.data, nodedesc, sdfg, self._frame)
            for k, v in _struct_members(nodedesc):
                member = nodes.AccessNode(f'{node.data}.{k}')
                if v.storage in host:
                    callsite_stream.write(f'delete[] {name}->{k};\n', cfg, state_id, node)
                else:
                    self._dispatcher.get_array_dispatcher(v.storage).deallocate_array(
                        sdfg, cfg, dfg, state_id, member, v, function_stream, callsite_stream)
            if self._dispatcher.declared_arrays.has(name):
                self._dispatcher.declared_arrays.remove(name, is_global=nodedesc.lifetime in (
                    dtypes.AllocationLifetime.Global, dtypes.AllocationLifetime.Persistent,
                    dtypes.AllocationLifetime.External))
            callsite_stream.write(f'delete {name};\n', cfg, state_id, node)

        return deallocate_array

    wrap(CPUCodeGen, 'allocate_array', make_alloc)
    wrap(CPUCodeGen, 'deallocate_array', make_free)


# ---------------------------------------------------------------------- patch 17
def _struct_keys(desc):
    return list(desc.keys()) if isinstance(desc, dace.data.Structure) else []


def _patch_frontend_renames():
    from dace.frontend.python import newast
    code = newast.ProgramVisitor.parse_program.__code__
    replace = dace.SDFG.replace_dict  # patch 3's (members of structures renamed too)

    def make_replace(orig):

        def replace_dict(self, repldict, *args, **kwargs):
            if not args and not kwargs and sys._getframe(1).f_code is code:
                self.__dict__.setdefault('_ss_renames', []).append(dict(repldict))
                return
            return orig(self, repldict, *args, **kwargs)

        return replace_dict

    def make_propagate(propagate):

        def propagate_states(sdfg, *args, **kwargs):
            renames = sdfg.__dict__.pop('_ss_renames', None)
            if renames:
                merged = {}
                for r in renames:  # two names of one array (``b = a``): the first rename wins, as before
                    if not merged.keys() & r.keys():
                        merged.update(r)
                if merged.keys() & set(merged.values()):
                    for k, v in merged.items():
                        if k in sdfg.arrays and v not in sdfg.arrays:
                            replace(sdfg, {k: v, **{f'{k}.{m}': f'{v}.{m}' for m in _struct_keys(sdfg.arrays[k])}})
                else:
                    replace(sdfg, merged)
            return propagate(sdfg, *args, **kwargs)

        return propagate_states

    if wrap(newast, 'propagate_states', make_propagate) is not None:
        wrap(dace.SDFG, 'replace_dict', make_replace)


# ---------------------------------------------------------------------- patch 18
def _patch_debuginfo():
    from dace.sdfg import state as state_module

    def make(orig):

        def _getdebuginfo(old_dinfo=None) -> dace.dtypes.DebugInfo:
            if old_dinfo is not None:
                return old_dinfo
            frame = sys._getframe(2)  # as inspect.stack()[2]: the caller of the add_* method
            return dace.dtypes.DebugInfo(frame.f_lineno, 0, frame.f_lineno, 0, frame.f_code.co_filename)

        return _getdebuginfo

    wrap(state_module, '_getdebuginfo', make)


# ---------------------------------------------------------------------- patch 19
def _patch_free_symbols_cache():
    from dace.codegen.targets.framecode import DaCeCodeGenerator

    def make(orig):

        def free_symbols(self, obj):
            hit = self.fsyms.get(id(obj))
            if hit is not None and isinstance(hit, tuple) and len(hit) == 2 and hit[0] is obj:
                return hit[1]
            result = obj.used_symbols(all_symbols=False) if hasattr(obj, 'used_symbols') else obj.free_symbols
            self.fsyms[id(obj)] = (obj, result)
            return result

        return free_symbols

    wrap(DaCeCodeGenerator, 'free_symbols', make)


# ---------------------------------------------------------------------- patch 20
def _patch_fpga_external_stream():
    from dace.codegen.targets import fpga

    def make(orig):

        def is_external_stream(node, subgraph):
            if not isinstance(node, dace.nodes.AccessNode):
                return False
            desc = node.desc(subgraph)
            if not isinstance(desc, dace.data.Stream):
                return False
            return not any(nn is not node and isinstance(nn, dace.nodes.AccessNode) and nn.data == node.data
                           and nn.desc(subgraph) is desc for nn in subgraph.nodes())

        return is_external_stream

    wrap(fpga, 'is_external_stream', make)


# ---------------------------------------------------------------------- patch 22
def _holds_structures(sdfg) -> bool:
    root = sdfg
    while getattr(root, 'parent_sdfg', None) is not None:
        root = root.parent_sdfg
    return any(isinstance(d, dace.data.Structure) for g in root.all_sdfgs_recursive() for d in g.arrays.values())


def _touches_structure(state, sdfg, access_nodes) -> bool:
    """A matched access node or a neighbour of it is a structure, a member of one (``A.vals``)
    or a view."""
    seen = set(access_nodes)
    for n in access_nodes:
        seen.update(e.src for e in state.in_edges(n))
        seen.update(e.dst for e in state.out_edges(n))
    for n in seen:
        if not isinstance(n, dace.nodes.AccessNode):
            continue
        desc = sdfg.arrays.get(n.data)
        if '.' in n.data or isinstance(desc, (dace.data.Structure, dace.data.View)):
            return True
    return False


def _refuse(cls, refused) -> None:

    def make(orig):

        def can_be_applied(self, graph, expr_index, sdfg, permissive=False):
            if refused(self, graph, sdfg):
                return False  # would leave an invalid SDFG (see sdfgsparse._dace_compat, patch 22)
            return orig(self, graph, expr_index, sdfg, permissive)

        return can_be_applied

    wrap(cls, 'can_be_applied', make, key=f'{__name__}._refuse.{cls.__name__}')


def _patch_unsafe_transformations():
    from dace.transformation.dataflow.redundant_array_copying import RedundantArrayCopying
    from dace.transformation.interstate import FPGATransformSDFG, FPGATransformState, NestSDFG
    for cls in (NestSDFG, FPGATransformSDFG, FPGATransformState):
        _refuse(cls, lambda self, graph, sdfg: _holds_structures(sdfg))
    _refuse(RedundantArrayCopying, lambda self, graph, sdfg: _touches_structure(
        graph, sdfg, [self.in_array, self.med_array, self.out_array]))


def apply():
    """Apply the fixes (once), on DaCe :data:`DACE_VERSION` only."""
    if _applied['done']:
        return
    _applied['done'] = True
    if dace.__version__ != DACE_VERSION:
        warnings.warn(f'sdfgsparse: its fixes of DaCe bugs are for DaCe {DACE_VERSION}; DaCe {dace.__version__} is '
                      f'left as it is (sdfgsparse is tested with DaCe {DACE_VERSION} only)', RuntimeWarning)
        return
    _patch_return_order()
    _patch_replace_dict()
    _patch_structure_json()
    _patch_fileheader_order()
    _patch_nested_symbol_types()
    _patch_structure_allocation()
    _patch_frontend_renames()  # after patch 3: the batched renames go through it
    _patch_debuginfo()
    _patch_free_symbols_cache()
    _patch_fpga_external_stream()
    _patch_unsafe_transformations()
