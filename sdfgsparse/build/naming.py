"""What names a build folder: the program's content and sdfgsparse's own source.

With DaCe's ``hash`` cache, DaCe 1.0.2 names a build folder by an MD5 of the SDFG's JSON
*including every node's random GUID*, so no two SDFG objects — no second process, no
re-parse — ever share a folder. sdfgsparse names it
``<program>_<content_hash>_ss<source_fingerprint>`` instead (:mod:`.folder`).
"""
import ctypes.util
import hashlib
import json
import os
import pathlib
import platform
import sys

import dace

from sdfgsparse.notes import NOTES

__all__ = ['source_fingerprint', 'content_hash', 'canonical_edge_order', 'CONFIG_KEYS']

_FINGERPRINT = []


def source_fingerprint() -> str:
    """A short hash of every ``.py`` file (and C++ / CUDA header, which generated code includes)
    of sdfgsparse, its transformations and its frontends (installed as
    ``sdfgsparse.transformations`` / ``sdfgsparse.frontends``)."""
    if not _FINGERPRINT:
        pkg = pathlib.Path(__file__).resolve().parent.parent  # sdfgsparse/
        h = hashlib.sha256()
        for root in (pkg, pkg.parent / 'transformations', pkg.parent / 'frontends'):
            for f in sorted([*root.rglob('*.py'), *root.rglob('*.h'), *root.rglob('*.cuh')]) if root.is_dir() else ():
                h.update(f.relative_to(root).as_posix().encode())
                h.update(f.read_bytes())
        _FINGERPRINT.append(h.hexdigest()[:12])
    return _FINGERPRINT[0]


#: Configuration sections whose settings change the generated code or the build.
CONFIG_KEYS = ('compiler', 'library', 'instrumentation', 'profiling')


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


def _libmvec() -> bool:
    """Whether generated loops may call glibc's vector math library (libmvec): x86-64 Linux
    where the library is installed, unless ``SDFGSPARSE_LIBMVEC=0``."""
    if os.environ.get('SDFGSPARSE_LIBMVEC', '1').strip().lower() in ('0', 'false', 'no', 'off'):
        return False
    return sys.platform.startswith('linux') and platform.machine() == 'x86_64' and \
        ctypes.util.find_library('mvec') is not None


#: :func:`_libmvec`, decided once when sdfgsparse is imported: the ``cpu`` kernels'
#: environment (targets/cpu/environment.py) links libmvec and defines ``SS_LIBMVEC`` by it,
#: and it is part of every build's key (:func:`content_hash`), so a build with it and one
#: without never share a folder.
LIBMVEC = _libmvec()


def content_hash(sdfg) -> str:
    """The build folder's key: the SDFG's JSON without its random GUIDs (names, symbols,
    instrumentation and debug information kept), plus DaCe's compiler, library and
    instrumentation settings as the build reads them (``DACE_compiler_cpu_args`` and the
    other ``DACE_*`` variables included: two flag sets gave one folder and a stale build),
    and :data:`LIBMVEC` (whether the ``cpu`` kernels' environment links libmvec)."""

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
    for key in CONFIG_KEYS:
        try:
            config[key] = effective((key, ), dace.Config.get(key))
        except KeyError:
            pass
    config['libmvec'] = LIBMVEC
    text = json.dumps([strip(sdfg.to_json()), config], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
