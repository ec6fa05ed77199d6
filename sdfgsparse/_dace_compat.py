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
7. Build type (1.0.2): DaCe's default ``compiler.build_type`` compiled every kernel at
   ``-O2``; we set ``Release`` (``-O3``) unless ``DACE_compiler_build_type`` says otherwise.
8. ``SDFG.build_folder`` / ``SDFG.compile`` (1.0.2): with ``cache = 'hash'`` DaCe names the
   folder by an MD5 of the SDFG's JSON *including every node's random GUID*, so no two
   SDFG objects — no second process, no re-parse — ever share a folder: every run built
   from scratch and the cache folder grew by a build per program per run (1,173 folders,
   2 GB here). The folder is named by :func:`content_hash` instead (the JSON without
   GUIDs, plus DaCe's compiler, library and instrumentation settings) and a fingerprint
   of sdfgsparse's sources, so that a build made by an older sdfgsparse or with other
   compiler flags is not reused. Code is still regenerated on every build (DaCe's
   ``regenerate_code``), but unchanged files are not rewritten, CMake is not reconfigured
   and ``make`` finds the library up to date (in a new process: within one process DaCe
   renames a second copy of a loaded program and builds it again). ``SDFG.compile`` holds
   an exclusive ``flock`` on ``<folder>.lock`` from writing the sources to loading the
   library, so that two processes building the same folder (pytest-xdist workers) take
   turns. Before naming the folder it puts each state's edges in one order
   (:func:`canonical_edge_order`: DaCe's simplify leaves them in a per-process random
   order for some programs). ``make`` trusts file times, so a build killed while linking
   left a 0-byte or half-written library that every later process loaded ("Could not
   load library" with an empty reason, or SIGBUS); under the lock, the build goes through
   :func:`sdfgsparse.runtime.buildcache.build`: libraries that do not match the folder's
   build record (size and SHA-256, written once a build and its load succeeded) are
   removed first, and the object files too when the last build was cut short, so ``make``
   builds them again; ``compiler.get_program_handle`` raises ``LibraryLoadError`` (its
   path, DaCe's error) for a library DaCe cannot load, which is then built once more
   before a ``BuildCacheError`` names the folder. Where the lock file cannot be created or
   the folder is not writable, a complete build is loaded without writing there (from
   private copies of the library and its stub; no CMake), and a folder without one
   raises ``BuildCacheError`` naming it (see runtime/buildcache.py).
9. CMake configure (1.0.2): every new build folder runs a full CMake configure — compiler
   identification, ABI detection, ``find_package(OpenMP)`` test builds — about 0.7 s of a
   2.5 s cold compile here, identical for every program of one configuration. After a
   build, its ``CMakeCache.txt`` and compiler-detection files are kept as a *seed* in
   ``$SDFGSPARSE_CMAKE_SEEDS/<key>`` (default ``~/.cache/sdfgsparse/cmake-seeds``, or under
   ``$XDG_CACHE_HOME``; set the variable empty to switch seeds off). The key hashes the
   CMake command without the program's name, sources and folder, the paths, sizes and
   times of ``cmake``, the C/C++ compilers and DaCe's configured compiler, and the
   environment variables CMake reads on a first configure (``CC``, ``CXX``, ``*FLAGS``,
   ``CMAKE_GENERATOR``, ``CUDACXX``). A new build folder of the same key starts
   from a copy of the seed, so CMake skips the detection (configure ~0.03 s); the command
   still sets the program's name, sources and flags, and g++ still compiles everything.
   When a seeded configure fails, DaCe's own retry wipes the build folder (and the
   ``.ss-seeded`` marker planted with the seed) and configures from scratch; that build's
   configuration then replaces the seed. Any error of the seed code itself only means no
   seed. ``SEEDS['planted']`` counts the build folders started from a seed.
10. ``DaCeCodeGenerator.generate_fileheader`` (1.0.2): the custom type definitions (our
   argument structs) are written in the iteration order of a ``set`` of typeclasses,
   whose hashes hold string hashes, which Python randomises per process. A program with
   two sparse types (``A.T @ B``: a CSR struct and a CSC view) got its structs in either
   order, so a second process rewrote the source and ``make`` rebuilt the library of
   an unchanged program (warm cache 2.3-2.7 s instead of ~1 s, about every other
   process). While the header is generated, that module's ``set`` iterates in a sorted
   order (by the type's C name), the same in every process.
11. Compiler flags (1.0.2): DaCe's default ``compiler.cpu.args`` holds ``-ffast-math``, and a
   shared library linked with it (GCC < 13 on x86, GCC and Clang on AArch64) carries
   ``crtfastmath.o``, whose constructor sets flush-to-zero and denormals-are-zero for the
   whole process when the library is loaded: after the first compiled program,
   ``np.array([1e-310]) * 2`` was 0 and ``1e-310 > 0`` was False in the caller's code.
   ``-ffast-math`` (and ``-Ofast``) are replaced by the parts of it that neither change
   the process's floating-point state nor the meaning of NaN and infinity
   (:data:`FP_FLAGS`: no ``errno``, no trapping, reassociation and no signed zeros, so
   the compiler may vectorise reductions). Kept inside kernels: sums may be reassociated
   (rounding differs from scipy's sequential order, within a few ulps per entry) and the
   sign of a zero result may differ. Set ``DACE_compiler_cpu_args`` to choose the flags
   yourself.
12. ``SDFG.compile`` (1.0.2): a symbol gets its C type from the first object that names it,
   and ``dace.symbol('N')`` is int32, so the column count of an int64-index matrix with
   more than 2**32 columns reached the kernels cut to 32 bits (an SpMV whose kernels check
   the indices returned zeros). Before compiling, the symbols that size an int64-index
   sparse structure are made int64 in every SDFG of the program
   (:func:`sdfgsparse.formats.format.widen_size_symbols`), and ``add_nested_sdfg`` (used by
   every library expansion, which happens during code generation) gives a nested SDFG's
   integer symbol the parent's width where the parent passes an int64 value.
13. ``CompiledSDFG.__call__`` (1.0.2): a compiled program keeps the arguments and return
   arrays of its last call on the object (``_lastargs``, ``_return_arrays``) and hands the
   same return arrays to every call until ``clear_return_values()``; DaCe's program calls
   that before calling, outside any lock. Threads calling one program received each
   other's results (402 of 800 wrong on 8 threads). Each call now holds a lock of its
   compiled program and gets new return arrays. (sdfgsparse's warm calls do not go
   through here: their plans keep nothing between calls and run concurrently.) A call
   that breaks a shape rule the frontend could not decide while parsing
   (:mod:`sdfgsparse.ops.shape_checks`) raises ``ShapeError`` before anything runs.
14. CUDA builds (1.0.2 with CUDA 13): stock DaCe cannot build a GPU program with nvcc 13.
   Without a GPU its arch probe falls back to ``compiler.cuda.cuda_arch``, default ``'60'``,
   which nvcc 13 rejects; its CMakeLists sets ``CMAKE_CUDA_STANDARD 14`` (Thrust / CUB need
   C++17); its runtime headers use ``cub::CountingInputIterator``,
   ``cub::TransformInputIterator`` and ``CTA_SYNC`` (removed in CUB 3). DaCe's default
   ``cuda_arch`` becomes ``'90'`` (DaCe reads it only where its probe finds no GPU; a
   user's setting is kept), and ``CUDACodeGen.cmake_options`` — asked only for programs
   with CUDA code, so CPU builds are unchanged — adds a CMake rules file that raises the
   standard to 17 and force-includes a header mapping the removed names. Details and
   reasons: :mod:`sdfgsparse.targets.cuda.compat`.
15. ``CPUCodeGen.allocate_array`` / ``deallocate_array`` (1.0.2): a transient structure
   (an intermediate sparse result, ``(A + B) @ x``) was allocated with ``new`` and its
   members with ``new[]`` whatever their storage, and freed with ``delete[]`` on the
   struct alone: every call leaked the members (``nnz`` values and indices of every
   intermediate sparse result) and freed the struct with the wrong operator; and a
   member in GPU memory could not be allocated at all ("Unimplemented storage type
   GPU_Global"), so no GPU program could hold an intermediate sparse result. Members of
   transient structures are now allocated and freed by the code generator of their
   storage (``cudaMalloc`` / ``cudaFree`` for ``GPU_Global``), and the struct with
   ``delete``.
16. ``GPUTransformSDFG`` (1.0.2; what ``SDFG.apply_gpu_transformations()`` applies): on a
   program with sparse data it left the sparse library nodes to expand with their CPU
   kernels (C++ loops run by the host over device memory) and copied each sparse
   argument into a structure in device memory, whose member copies DaCe 1.0.2 generates
   as code that does not compile (``gpu_A[__idx].vals``). Before the transformation, the
   sparse nodes now take their portable expansion and each host sparse argument gets a
   device twin (a host struct of device arrays); after it, states copy the members in
   and (when written) out, and intermediate sparse results become host structs of device
   arrays (:mod:`sdfgsparse.targets.cuda.lower`). Programs without sparse data are
   untouched.
17. ``ProgramVisitor.parse_program`` (1.0.2): at the end of parsing, the frontend renames
   each transient to the Python name it was assigned to, one ``SDFG.replace_dict`` per
   variable, each of which walks every node, memlet and tasklet of the program: parse
   time grew with (variables x program size); the 4-layer attention model of
   ``ss.torch.compile`` (64 assignments) spent 40 % of its parse there. The renames of
   that loop are now collected and applied in one ``replace_dict`` just before the
   frontend's next step (``propagate_states``); where a new name is also an old one (the
   order would matter) they are applied one by one as before. The SDFG is the same.
18. ``dace.sdfg.state._getdebuginfo`` (1.0.2): every node added to a state without debug
   information records its caller's file and line through ``inspect.stack()``, which
   builds the whole call stack and reads a source line of every frame of it (module
   lookups, file reads), a visible part of parsing and of expanding library nodes. The
   patch reads the same frame with ``sys._getframe``;
   the recorded file and line are the same.
19. ``DaCeCodeGenerator.free_symbols`` (1.0.2): the code generator caches the symbols an
   object uses by ``id(obj)``, and the FPGA code generator asks it for each processing
   element's subgraph, a ``SubgraphView`` made for the question and freed after it. A
   later subgraph allocated at the same address got the freed one's symbols: a kernel's
   processing element missed a symbol its loop bounds use (``'K' was not declared``, or a
   wrong bound), depending on the hash seed. The cache now keeps the object with its
   symbols and answers only for that same object (an id is not reused while the object
   is alive).
20. ``dace.codegen.targets.fpga.is_external_stream`` (1.0.2; added with TemporalVectorization,
   spcl/dace PR 1131): it decides whether a stream leaves a processing element (so that
   the FPGA code generator makes it a kernel port rather than a FIFO local to the
   module) by looking in the PE for another access node whose *descriptor compares
   equal*, and ``Data.__eq__`` is structural. Two different streams of the same type and
   depth in one PE ("xv_s" and "vb_s" feeding a multi-pumped PE) hid each other: the
   stream to the pumped kernel was declared inside its producer's module and the program
   deadlocked (prototype workaround: distinct depths). The other end is now looked for
   by identity: another access node (``is not``) of the same container (same name, same
   descriptor object). Designs whose streams differ in type or depth are unchanged.
21. ``dace.SDFG`` properties (1.0.2): an SDFG has no property for facts a tool records
   about it, so what ``ss.optimize(..., matrices=)``, ``sdfgsparse annotate`` and the
   ``SparseIOLowerBound`` pass learn (structure statistics and symbol values of example
   arguments; the I/O lower bound) did not survive a save, a reload or the VS Code
   extension's JSON round trip, and SparseFormatSelection / SparseDenseTiling, which need
   them, were never listed in the editor. The SDFG gets one more serialisable property,
   ``sparse_notes`` (a JSON dict, default empty; its keys are those of
   :mod:`sdfgsparse.transformations.examples`), which the build folder's content hash
   (patch 8) leaves out, with the sparse nodes' ``io_lower_bound`` notes: notes do not
   change the generated code.
22. DaCe transformations that corrupt sparse SDFGs (1.0.2): ``NestSDFG`` (and
   ``FPGATransformSDFG`` and ``FPGATransformState``, which nest the program first) give the
   nested SDFG no descriptor for a structure's members (memlets on ``A.pos1`` then name
   no array: the result does not validate, and the VS Code backend fails on every later
   request until undo); ``RedundantArrayCopying`` removes a copy between views of a
   structure's members and leaves a view with two incoming edges. Their
   ``can_be_applied`` now refuses programs holding sparse structures (the first three;
   :func:`sdfgsparse.optimize` with ``target='fpga'`` is the FPGA path for them) and
   matches touching a structure, a structure member or a view of one (the last);
   everything else goes to DaCe's own check. ``GPUTransformSDFG`` is patch 16.
23. NumPy's ``np.maximum`` / ``np.minimum`` in a program (1.0.2): DaCe's ufunc tasklets are
   ``max(a, b)`` / ``min(a, b)``, i.e. C++ ``a > b ? a : b``, which returns ``b`` when ``a``
   is NaN: ``np.maximum(A @ X, 0)`` (the GCN layer) turned a NaN into 0, and
   ``np.maximum(nan, 1)`` was 1; NumPy gives NaN when either operand is NaN. The two ufunc
   tasklets (:data:`NAN_UFUNC_CODE`) now return the first operand when it is NaN or wins the
   comparison, else the second (a NaN second operand loses every comparison and is
   returned). ``np.fmax`` / ``np.fmin`` (C's ``fmax``/``fmin``) already ignore NaN; the
   reductions (``np.max``, ``np.maximum.reduce``) are unchanged.
"""
import os
import re
import sys

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
    """A short hash of every ``.py`` file (and C++ header, which generated code includes)
    of sdfgsparse, its transformations and its frontends (installed as
    ``sdfgsparse.transformations`` / ``sdfgsparse.frontends``)."""
    if not _FINGERPRINT:
        import hashlib
        import pathlib
        pkg = pathlib.Path(__file__).resolve().parent
        h = hashlib.sha256()
        for root in (pkg, pkg.parent / 'transformations', pkg.parent / 'frontends'):
            for f in sorted([*root.rglob('*.py'), *root.rglob('*.h')]) if root.is_dir() else ():
                h.update(f.relative_to(root).as_posix().encode())
                h.update(f.read_bytes())
        _FINGERPRINT.append(h.hexdigest()[:12])
    return _FINGERPRINT[0]


def _patch_build_folder():
    prop = dace.SDFG.build_folder
    if getattr(prop.fget, '_sdfgsparse', False):
        return

    def named_by_content(sdfg) -> bool:  # no folder set by hand, DaCe's hash cache
        return '_build_folder' not in sdfg.__dict__ and dace.Config.get('cache') == 'hash'

    def build_folder(self):
        if not named_by_content(self):
            return prop.fget(self)
        base = dace.Config.get('default_build_folder')
        return os.path.join(base, f'{self.name}_{content_hash(self)}_ss{source_fingerprint()}')

    build_folder._sdfgsparse = True
    build_folder.__doc__ = prop.fget.__doc__
    dace.SDFG.build_folder = property(build_folder, prop.fset)

    orig_compile = dace.SDFG.compile

    def compile(self, *args, **kwargs):
        if not named_by_content(self):
            return orig_compile(self, *args, **kwargs)
        from sdfgsparse.runtime import buildcache
        canonical_edge_order(self)
        folder = self.build_folder
        # one build of this folder at a time, from writing the sources to loading the library
        lock = _locked(os.path.abspath(folder) + '.lock')
        try:
            os.makedirs(os.path.dirname(os.path.abspath(folder)), exist_ok=True)
            lock.acquire()
        except OSError as exc:  # a read-only cache: its complete builds are loaded as they are
            if not buildcache.is_read_only_error(exc):
                raise buildcache.no_space(exc, os.path.dirname(os.path.abspath(folder))) or exc
            return buildcache.load_read_only(self, folder, f'its lock file cannot be created: {exc}', *args, **kwargs)
        try:
            if not buildcache.writable(folder):
                return buildcache.load_read_only(self, folder, 'the folder is not writable', *args, **kwargs)
            result = None
            if not args and set(kwargs) <= {'validate'}:  # a library, loaded: a warm load will do
                result = buildcache.load_complete(self, folder)
            if result is None:
                self._build_folder = folder  # computed once for this build
                try:
                    result = buildcache.build(os.path.abspath(folder), lambda: orig_compile(self, *args, **kwargs))
                finally:
                    del self._build_folder
            try:  # last use, for ``sdfgsparse cache`` (runtime/buildcache.py)
                os.utime(folder, None)
            except OSError:
                pass
            return result
        finally:
            lock.release()

    compile._sdfgsparse = True
    compile.__doc__ = orig_compile.__doc__
    dace.SDFG.compile = compile
    _patch_program_handle()


def _patch_program_handle():
    """Patch 8: a library that DaCe's loader refuses raises ``buildcache.LibraryLoadError``
    (its path and DaCe's error), which the compile wrapper answers by building it again."""
    from dace.codegen import compiler
    orig = compiler.get_program_handle
    if getattr(orig, '_sdfgsparse', False):
        return

    def get_program_handle(library_path, sdfg):
        try:
            return orig(library_path, sdfg)
        except (OSError, RuntimeError, KeyError) as exc:  # ctypes, ReloadableDLL.load, get_symbol
            from sdfgsparse.runtime.buildcache import LibraryLoadError
            raise LibraryLoadError(library_path, exc) from exc

    get_program_handle._sdfgsparse = True
    get_program_handle.__doc__ = orig.__doc__
    compiler.get_program_handle = get_program_handle


#: Configuration sections whose settings change the generated code or the build.
_CONFIG_KEYS = ('compiler', 'library', 'instrumentation', 'profiling')


def canonical_edge_order(sdfg) -> None:
    """Put the edges of every state in one order (by the node ids and connectors they join
    and their memlets): DaCe's ``ArrayElimination`` (in ``simplify``) re-routes edges in
    the iteration order of sets of nodes, which Python's string hashing randomises per
    process, so the same program's SDFG came out with its edges in another order in
    another process — another folder name and another build (``A + A.T``). The order of a
    state's edges has no meaning in the dataflow."""
    for graph in sdfg.all_sdfgs_recursive():
        for state in graph.all_states():
            edges = list(state.edges())
            if len(edges) < 2:
                continue
            ids = {n: i for i, n in enumerate(state.nodes())}
            ordered = sorted(edges, key=lambda e: (ids[e.src], e.src_conn or '', ids[e.dst], e.dst_conn or '',
                                                   str(e.data)))
            if ordered == edges:
                continue
            for e in edges:
                state.remove_edge(e)
            for e in ordered:
                state.add_edge(e.src, e.src_conn, e.dst, e.dst_conn, e.data)


def content_hash(sdfg) -> str:
    """Patch 8's folder key: the SDFG's JSON without its random GUIDs (names, symbols,
    instrumentation and debug information kept), plus DaCe's compiler, library and
    instrumentation settings as the build reads them (``DACE_compiler_cpu_args`` and the
    other ``DACE_*`` variables included: two flag sets gave one folder and a stale build)."""
    import hashlib
    import json

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in ('guid', 'cfg_list_id', NOTES, 'io_lower_bound')}
        if isinstance(o, (list, tuple)):
            return [strip(v) for v in o]
        return o

    def effective(path, value):  # Config.get of a section ignores DACE_<section>_<key> variables; of a key not
        if isinstance(value, dict):
            return {k: effective(path + (k, ), v) for k, v in value.items()}
        return dace.Config.get(*path)

    config = {}
    for key in _CONFIG_KEYS:
        try:
            config[key] = effective((key, ), dace.Config.get(key))
        except KeyError:
            pass
    text = json.dumps([strip(sdfg.to_json()), config], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class _locked:
    """An exclusive ``flock`` on ``path`` for the duration (no lock where there is no
    ``fcntl``). Whoever holds the lock may remove the file (``sdfgsparse cache --prune``
    removes a build folder with its lock file): a waiter that then gets the lock of the
    removed file opens the path again, so two holders never overlap.

    ``acquire(blocking=False)`` returns False instead of waiting when another holds it."""

    def __init__(self, path: str):
        self.path = path
        self.file = None

    def acquire(self, blocking: bool = True) -> bool:
        while True:
            handle = open(self.path, 'a')
            try:
                import fcntl
            except ImportError:
                self.file = handle
                return True
            try:
                fcntl.flock(handle, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                return False
            try:
                current = os.fstat(handle.fileno()).st_ino == os.stat(self.path).st_ino
            except OSError:  # removed while we waited
                current = False
            if current:
                self.file = handle
                return True
            handle.close()

    def release(self):
        if self.file is not None:
            self.file.close()  # releases the lock
            self.file = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False


# ---------------------------------------------------------------------- patch 9
#: Build folders of this process that started from a seed (the benchmark reports it).
SEEDS = {'planted': 0}
_PLANTED = set()  # their paths
_SEED_BUILD = '@SS_BUILD_DIR@'
_SEED_MARK = '.ss-seeded'
# arguments of DaCe's CMake command that name the program, its sources and its folder
_PROGRAM_ARGS = re.compile(r'-DDACE_SRC_DIR="[^"]*"|-DDACE_FILES="[^"]*"|-DDACE_PROGRAM_NAME=\S+')
_ENV_KEYS = ('CC', 'CXX', 'CFLAGS', 'CXXFLAGS', 'LDFLAGS', 'CMAKE_GENERATOR', 'CUDACXX')


def _toolchain() -> str:
    """Paths, sizes and modification times of ``cmake``, the C/C++ compilers and DaCe's
    configured compiler, and the environment variables a first configure reads."""
    import shutil
    tools = ['cmake', os.environ.get('CC') or 'cc', os.environ.get('CXX') or 'c++']
    try:
        tools.append(dace.Config.get('compiler', 'cpu', 'executable') or '')
    except KeyError:
        pass
    parts = []
    for tool in tools:
        path = shutil.which(tool) if tool else None
        if path:
            real = os.path.realpath(path)
            st = os.stat(real)
            parts.append(f'{tool}={real}:{st.st_size}:{st.st_mtime_ns}')
        else:
            parts.append(f'{tool}=?')
    parts += [f'{k}={os.environ.get(k)}' for k in _ENV_KEYS]
    return ';'.join(parts)


def cmake_seed_key(command: str) -> str:
    """The seed key of a DaCe CMake configure command (see patch 9)."""
    import hashlib
    general = _PROGRAM_ARGS.sub('', command)
    return hashlib.sha256(f'{general}\n{_toolchain()}'.encode()).hexdigest()[:16]


def _seed_path(command: str):
    """Where the seed of ``command`` lives, or None when seeds are switched off."""
    root = os.environ.get('SDFGSPARSE_CMAKE_SEEDS')
    if root is None:
        base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
        root = os.path.join(base, 'sdfgsparse', 'cmake-seeds')
    return os.path.join(root, cmake_seed_key(command)) if root else None


def _version_dirs(cmake_files: str):
    """CMake's per-version folders of compiler-detection results in ``CMakeFiles``."""
    if not os.path.isdir(cmake_files):
        return []
    return [d for d in os.listdir(cmake_files) if re.fullmatch(r'\d+\.\d+[\w.-]*', d)]


def _plant_seed(build_folder: str, command: str) -> bool:
    """Start an unconfigured build folder from the seed of its command, if there is one."""
    import shutil
    build = os.path.abspath(build_folder)
    try:
        seed = _seed_path(command)
        if seed is None or os.path.isfile(os.path.join(build, 'CMakeCache.txt')):
            return False
        cache = os.path.join(seed, 'CMakeCache.txt')
        if not os.path.isfile(cache):
            return False
        with open(cache) as f:
            text = f.read().replace(_SEED_BUILD, build)
        for d in _version_dirs(os.path.join(seed, 'CMakeFiles')):
            shutil.copytree(os.path.join(seed, 'CMakeFiles', d), os.path.join(build, 'CMakeFiles', d),
                            dirs_exist_ok=True)
        with open(os.path.join(build, 'CMakeCache.txt'), 'w') as f:
            f.write(text)
        with open(os.path.join(build, _SEED_MARK), 'w') as f:
            f.write(seed)
    except Exception:  # the seed is only a shortcut: CMake configures from scratch
        for name in ('CMakeCache.txt', _SEED_MARK):
            try:
                os.remove(os.path.join(build, name))
            except OSError:
                pass
        return False
    SEEDS['planted'] += 1
    _PLANTED.add(build)
    return True


def _keep_seed(build_folder: str) -> None:
    """After a successful build: keep its configuration as the seed of its command. A
    folder started from a seed that lost its marker was wiped by DaCe's retry after the
    seeded configure failed: the seed is replaced."""
    import shutil
    import tempfile
    build = os.path.abspath(build_folder)
    tmp = None
    try:
        with open(os.path.join(build, 'cmake_configure.sh')) as f:
            command = f.read()
        seed = _seed_path(command)
        if seed is None:
            return
        if build in _PLANTED:
            _PLANTED.discard(build)
            if not os.path.isfile(os.path.join(build, _SEED_MARK)):
                shutil.rmtree(seed, ignore_errors=True)
        if os.path.isdir(seed):
            return
        with open(os.path.join(build, 'CMakeCache.txt')) as f:
            text = f.read()
        versions = _version_dirs(os.path.join(build, 'CMakeFiles'))
        if build not in text or not versions:
            return
        os.makedirs(os.path.dirname(seed), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix='.tmp', dir=os.path.dirname(seed))
        for d in versions:
            shutil.copytree(os.path.join(build, 'CMakeFiles', d), os.path.join(tmp, 'CMakeFiles', d))
        with open(os.path.join(tmp, 'CMakeCache.txt'), 'w') as f:
            f.write(text.replace(build, _SEED_BUILD))
        os.rename(tmp, seed)  # atomic; fails if another process kept one first
        tmp = None
    except Exception:  # no seed kept; the build itself succeeded
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _patch_cmake_seed():
    from dace.codegen import compiler
    if getattr(compiler.configure_and_compile, '_sdfgsparse', False):
        return
    orig_identical, orig_build = compiler.identical_file_exists, compiler.configure_and_compile

    def identical_file_exists(filename, file_contents):
        same = orig_identical(filename, file_contents)
        if not same and os.path.basename(filename) == 'cmake_configure.sh':
            _plant_seed(os.path.dirname(filename), file_contents)
        return same

    def configure_and_compile(program_folder, program_name=None, output_stream=None):
        result = orig_build(program_folder, program_name, output_stream)
        _keep_seed(os.path.join(os.path.abspath(program_folder), 'build'))
        return result

    configure_and_compile._sdfgsparse = True
    configure_and_compile.__doc__ = orig_build.__doc__
    compiler.identical_file_exists = identical_file_exists
    compiler.configure_and_compile = configure_and_compile


class _SortedSet(set):
    """A ``set`` that iterates in an order independent of hashing (patch 10)."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self), key=lambda t: (str(t), repr(t))))


def _patch_fileheader_order():
    from dace.codegen.targets import framecode
    cls = framecode.DaCeCodeGenerator
    orig = cls.generate_fileheader
    if getattr(orig, '_sdfgsparse', False):
        return

    def generate_fileheader(self, *args, **kwargs):
        had = 'set' in framecode.__dict__
        framecode.set = _SortedSet
        try:
            return orig(self, *args, **kwargs)
        finally:
            if not had:
                del framecode.set

    generate_fileheader._sdfgsparse = True
    generate_fileheader.__doc__ = orig.__doc__
    cls.generate_fileheader = generate_fileheader


# ---------------------------------------------------------------------- patch 11
#: What replaces ``-ffast-math``: none of these links ``crtfastmath.o`` or assumes finite values.
FP_FLAGS = ('-fno-math-errno', '-fno-trapping-math', '-fno-signed-zeros', '-fassociative-math')


def without_fast_math(args: str) -> str:
    """``args`` (compiler flags) with ``-ffast-math`` / ``-Ofast`` replaced (patch 11)."""
    out = []
    for flag in args.split():
        if flag == '-Ofast':
            out.append('-O3')
        if flag in ('-ffast-math', '-Ofast'):
            out += [f for f in FP_FLAGS if f not in out and f not in args.split()]
        else:
            out.append(flag)
    return ' '.join(out)


# ---------------------------------------------------------------------- patch 12
def _patch_compile_types():
    orig = dace.SDFG.compile
    if getattr(orig, '_sdfgsparse_types', False):
        return

    def compile(self, *args, **kwargs):
        from sdfgsparse.formats.format import widen_size_symbols
        widen_size_symbols(self)
        return orig(self, *args, **kwargs)

    compile._sdfgsparse_types = True
    compile.__doc__ = orig.__doc__
    dace.SDFG.compile = compile

    from dace.sdfg.state import SDFGState
    from dace.codegen.tools.type_inference import infer_expr_type
    orig_nest = SDFGState.add_nested_sdfg

    def add_nested_sdfg(self, sdfg, *args, **kwargs):
        node = orig_nest(self, sdfg, *args, **kwargs)
        inner = node.sdfg
        for sym, value in node.symbol_mapping.items():
            if inner.symbols.get(str(sym)) not in (dace.int8, dace.int16, dace.int32):
                continue  # (absent, or int64 already, or not an integer)
            if infer_expr_type(value, self.sdfg.symbols) == dace.int64:
                inner.symbols[str(sym)] = dace.int64
        return node

    add_nested_sdfg.__doc__ = orig_nest.__doc__
    SDFGState.add_nested_sdfg = add_nested_sdfg


# ---------------------------------------------------------------------- patch 13
def _patch_compiled_call():
    cls = compiled_sdfg.CompiledSDFG
    orig = cls.__call__
    if getattr(orig, '_sdfgsparse', False):
        return

    def __call__(self, *args, **kwargs):
        from sdfgsparse.runtime.call import lock_of
        rules = self.__dict__.get('_ss_shape_rules')
        if rules is None:
            from sdfgsparse.ops.shape_checks import rules as shape_rules
            from sdfgsparse.runtime.symexpr import compile_rules
            rules = self._ss_shape_rules = compile_rules(shape_rules(self.sdfg))
        if rules:
            from sdfgsparse.ops.shape_checks import violation
            values = {**dict(zip(self.argnames or [], args)), **kwargs}
            broken = violation(rules, {k: v for k, v in values.items() if isinstance(v, (int, np.integer))})
            if broken is not None:
                from sdfgsparse import errors
                raise errors.ShapeError(broken)
        with lock_of(self):
            self.clear_return_values()
            return orig(self, *args, **kwargs)

    __call__._sdfgsparse = True
    __call__.__doc__ = orig.__doc__
    cls.__call__ = __call__


# ---------------------------------------------------------------------- patch 14
def _patch_cuda_build():
    from dace.codegen import common
    from dace.codegen.targets.cuda import CUDACodeGen
    orig = CUDACodeGen.cmake_options
    if getattr(orig, '_sdfgsparse', False):
        return

    def cmake_options():
        options = orig()
        if common.get_gpu_backend() == 'cuda':
            from sdfgsparse.targets.cuda.compat import cmake_args
            options += cmake_args()
        return options

    cmake_options._sdfgsparse = True
    cmake_options.__doc__ = orig.__doc__
    CUDACodeGen.cmake_options = staticmethod(cmake_options)


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
    orig_alloc, orig_free = CPUCodeGen.allocate_array, CPUCodeGen.deallocate_array
    if getattr(orig_alloc, '_sdfgsparse', False):
        return
    host = (dtypes.StorageType.Default, dtypes.StorageType.CPU_Heap)

    def allocate_array(self, sdfg, cfg, dfg, state_id, node, nodedesc, function_stream, declaration_stream,
                       allocation_stream, allocate_nested_data=True):
        if not (allocate_nested_data and _owned_structure(sdfg, node, nodedesc)):
            return orig_alloc(self, sdfg, cfg, dfg, state_id, node, nodedesc, function_stream, declaration_stream,
                              allocation_stream, allocate_nested_data)
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

    for new, old in ((allocate_array, orig_alloc), (deallocate_array, orig_free)):
        new._sdfgsparse = True
        new.__doc__ = old.__doc__
    CPUCodeGen.allocate_array = allocate_array
    CPUCodeGen.deallocate_array = deallocate_array


# ---------------------------------------------------------------------- patch 16
def _patch_gpu_transformation():
    from dace.transformation.interstate import GPUTransformSDFG
    orig = GPUTransformSDFG.apply
    if getattr(orig, '_sdfgsparse', False):
        return

    def apply(self, graph, sdfg):
        from sdfgsparse.targets.cuda import lower
        sparse = any(isinstance(d, dace.data.Structure) for g in sdfg.all_sdfgs_recursive() for d in g.arrays.values())
        if not sparse:
            return orig(self, graph, sdfg)
        lower.expand_sparse_nodes(sdfg)
        twins = lower.device_twins(sdfg)
        lower.device_storage_inward(sdfg)
        simplify, self.simplify = self.simplify, False  # it would drop writes to twins not yet copied out
        try:
            result = orig(self, graph, sdfg)
        finally:
            self.simplify = simplify
        lower.copy_twins(sdfg, twins)
        if simplify:
            sdfg.simplify()
        lower.structures_of_device_arrays(sdfg)
        return result

    apply._sdfgsparse = True
    apply.__doc__ = orig.__doc__
    GPUTransformSDFG.apply = apply


# ---------------------------------------------------------------------- patch 17
def _struct_keys(desc):
    return list(desc.keys()) if isinstance(desc, dace.data.Structure) else []


def _patch_frontend_renames():
    from dace.frontend.python import newast
    code = newast.ProgramVisitor.parse_program.__code__
    replace = dace.SDFG.replace_dict  # patch 3's (members of structures renamed too)
    propagate = newast.propagate_states
    if getattr(propagate, '_sdfgsparse', False):
        return

    def replace_dict(self, repldict, *args, **kwargs):
        if not args and not kwargs and sys._getframe(1).f_code is code:
            self.__dict__.setdefault('_ss_renames', []).append(dict(repldict))
            return
        return replace(self, repldict, *args, **kwargs)

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

    replace_dict._sdfgsparse = propagate_states._sdfgsparse = True
    replace_dict.__doc__ = replace.__doc__
    dace.SDFG.replace_dict = replace_dict
    newast.propagate_states = propagate_states


# ---------------------------------------------------------------------- patch 18
def _patch_debuginfo():
    from dace.sdfg import state as state_module
    if getattr(state_module._getdebuginfo, '_sdfgsparse', False):
        return

    def _getdebuginfo(old_dinfo=None) -> dace.dtypes.DebugInfo:
        if old_dinfo is not None:
            return old_dinfo
        frame = sys._getframe(2)  # as inspect.stack()[2]: the caller of the add_* method
        return dace.dtypes.DebugInfo(frame.f_lineno, 0, frame.f_lineno, 0, frame.f_code.co_filename)

    _getdebuginfo._sdfgsparse = True
    _getdebuginfo.__doc__ = state_module._getdebuginfo.__doc__
    state_module._getdebuginfo = _getdebuginfo


def _patch_free_symbols_cache():
    from dace.codegen.targets.framecode import DaCeCodeGenerator
    if getattr(DaCeCodeGenerator.free_symbols, '_sdfgsparse', False):
        return

    def free_symbols(self, obj):
        hit = self.fsyms.get(id(obj))
        if hit is not None and isinstance(hit, tuple) and len(hit) == 2 and hit[0] is obj:
            return hit[1]
        result = obj.used_symbols(all_symbols=False) if hasattr(obj, 'used_symbols') else obj.free_symbols
        self.fsyms[id(obj)] = (obj, result)
        return result

    free_symbols._sdfgsparse = True
    free_symbols.__doc__ = DaCeCodeGenerator.free_symbols.__doc__
    DaCeCodeGenerator.free_symbols = free_symbols


# ---------------------------------------------------------------------- patch 20
def _patch_fpga_external_stream():
    from dace.codegen.targets import fpga
    orig = fpga.is_external_stream
    if getattr(orig, '_sdfgsparse', False):
        return

    def is_external_stream(node, subgraph):
        if not isinstance(node, dace.nodes.AccessNode):
            return False
        desc = node.desc(subgraph)
        if not isinstance(desc, dace.data.Stream):
            return False
        return not any(nn is not node and isinstance(nn, dace.nodes.AccessNode) and nn.data == node.data
                       and nn.desc(subgraph) is desc for nn in subgraph.nodes())

    is_external_stream._sdfgsparse = True
    is_external_stream.__doc__ = orig.__doc__
    is_external_stream.__wrapped__ = orig
    fpga.is_external_stream = is_external_stream


# ---------------------------------------------------------------------- patch 23
#: The code of DaCe's element-wise ufunc tasklets that patch 23 replaces: NaN in either operand gives NaN.
NAN_UFUNC_CODE = {
    'maximum': '__out = __in1 if (__in1 > __in2 or __in1 != __in1) else __in2',
    'minimum': '__out = __in1 if (__in1 < __in2 or __in1 != __in1) else __in2',
}


def _patch_nan_extrema():
    from dace.frontend.python import replacements
    for name, code in NAN_UFUNC_CODE.items():
        replacements.ufuncs[name]['code'] = code


# ---------------------------------------------------------------------- patch 21
NOTES = 'sparse_notes'  #: the SDFG property of patch 21


def _patch_sdfg_notes():
    from dace import properties
    if NOTES in dace.SDFG.__properties__:
        return
    def get(sdfg):
        return sdfg.__dict__.setdefault('_' + NOTES, {})

    def put(sdfg, value):
        if not isinstance(value, dict):
            raise TypeError(f'SDFG.{NOTES} must be a dict, got {type(value).__name__}')
        sdfg.__dict__['_' + NOTES] = value

    prop = properties.Property(dtype=dict, default={}, allow_none=False, getter=get, setter=put,
                               desc='sdfgsparse notes: structure statistics and symbol values of example arguments '
                               '(ss.optimize(matrices=), sdfgsparse annotate) and the I/O lower bound '
                               '(SparseIOLowerBound); read by SparseFormatSelection and SparseDenseTiling')
    prop.attr_name = NOTES
    prop.owner = dace.SDFG
    dace.SDFG.__properties__[NOTES] = prop
    setattr(dace.SDFG, NOTES, prop)


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
    orig = cls.can_be_applied
    if getattr(orig, '_sdfgsparse', False):
        return

    def can_be_applied(self, graph, expr_index, sdfg, permissive=False):
        if refused(self, graph, sdfg):
            return False  # would leave an invalid sparse SDFG (see sdfgsparse._dace_compat, patch 22)
        return orig(self, graph, expr_index, sdfg, permissive)

    can_be_applied._sdfgsparse = True
    can_be_applied.__doc__ = orig.__doc__
    can_be_applied.__wrapped__ = orig
    cls.can_be_applied = can_be_applied


def _patch_unsafe_transformations():
    from dace.transformation.dataflow.redundant_array_copying import RedundantArrayCopying
    from dace.transformation.interstate import FPGATransformSDFG, FPGATransformState, NestSDFG
    for cls in (NestSDFG, FPGATransformSDFG, FPGATransformState):
        _refuse(cls, lambda self, graph, sdfg: _holds_structures(sdfg))
    _refuse(RedundantArrayCopying, lambda self, graph, sdfg: _touches_structure(
        graph, sdfg, [self.in_array, self.med_array, self.out_array]))


def apply():
    if _applied['done']:
        return
    if 'DACE_cache' not in os.environ:
        dace.Config.set('cache', value='hash')
    if 'DACE_compiler_build_type' not in os.environ:
        dace.Config.set('compiler', 'build_type', value='Release')
    if 'DACE_compiler_cpu_args' not in os.environ:
        dace.Config.set('compiler', 'cpu', 'args', value=without_fast_math(dace.Config.get('compiler', 'cpu', 'args')))
    _patch_call()
    _patch_returns()
    _patch_replace_dict()
    _patch_structure_json()
    _patch_return_arrays()
    _patch_build_folder()
    _patch_cmake_seed()
    _patch_fileheader_order()
    _patch_compile_types()  # after patch 8: the types are set before the folder is named
    _patch_compiled_call()
    from sdfgsparse.targets.cuda.compat import default_arch
    default_arch()
    _patch_cuda_build()
    _patch_structure_allocation()
    _patch_gpu_transformation()
    _patch_frontend_renames()  # after patch 3: the batched renames go through it
    _patch_debuginfo()
    _patch_free_symbols_cache()
    _patch_fpga_external_stream()
    _patch_sdfg_notes()
    _patch_unsafe_transformations()
    _patch_nan_extrema()
    _applied['done'] = True
