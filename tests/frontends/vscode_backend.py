"""A model of the DaCe VS Code extension's backend (spcl/dace-vscode 1.9.0,
``backend/run_dace.py`` and ``backend/dace_vscode/transformations.py``), for the protocol
test: a Flask server on loopback with the routes the extension calls, each making the
DaCe calls that backend makes (written here from its behaviour, not copied):

* ``/add_transformations``: import each path with ``importlib.util.spec_from_file_location``
  under the path as module name;
* ``/get_metadata``: the properties of every class in ``dace.serialize._DACE_SERIALIZE_TYPES``
  (library nodes under their class path)
  (after one ``Optimizer.get_pattern_matches`` on an empty SDFG, as the backend does);
* ``/transformations``: ``SDFGOptimizer(sdfg).get_pattern_matches(permissive=...)`` with
  ``testing.serialize_all_fields`` on, then every pass of ``available_passes(False)``
  except the categories 'Helper' and 'Analysis', with the docstrings by class name;
* ``/apply_transformations``: ``serialize.from_json`` of each transformation, then
  ``apply_pattern`` on ``sdfg.cfg_list[cfg_id]`` (a Pass: in a ``Pipeline``);
* ``/expand_library_node``: ``node.expand(sdfg, state)``, or all nodes;
* ``/reapply_history_until``: ``orig_sdfg`` with the history replayed up to an index.

Run as ``python vscode_backend.py PORTFILE``: it binds a free port on 127.0.0.1, writes it
to PORTFILE and serves until killed. It imports nothing of sdfgsparse itself: that comes
only through ``/add_transformations``, as in the editor.
"""
import importlib.util
import sys
import traceback


def _error(message, exc):
    traceback.print_exc(file=sys.stderr)
    return {'error': {'message': message, 'details': f'{type(exc).__name__}: {exc}'}}


def _load(sdfg_json):
    import dace
    return dace.SDFG.from_json(sdfg_json)


def add_transformations(paths):
    try:
        for path in paths:
            if path not in sys.modules:
                spec = importlib.util.spec_from_file_location(path, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[path] = module
                spec.loader.exec_module(module)
        return {'done': True}
    except Exception as exc:
        return _error('Failed to load custom transformation(s)', exc)


def metadata():
    import dace
    from dace.transformation import optimizer
    optimizer.Optimizer(dace.SDFG('dummy')).get_pattern_matches()
    from dace.sdfg.nodes import LibraryNode, full_class_path
    meta = {}
    for name, cls in dace.serialize._DACE_SERIALIZE_TYPES.items():
        if hasattr(cls, '__properties__'):  # library nodes by their class path
            key = full_class_path(cls) if issubclass(cls, LibraryNode) and cls is not LibraryNode else name
            meta[key] = {p: prop.meta_to_json(prop) for p, prop in cls.__properties__.items()}
    return {'metaDict': meta}


def transformations(sdfg_json, permissive):
    from dace import config
    from dace.transformation import passes
    from dace.transformation.optimizer import SDFGOptimizer
    try:
        sdfg = _load(sdfg_json)
    except Exception as exc:
        return _error('Failed to parse the provided SDFG', exc)
    with config.set_temporary('testing', 'serialize_all_fields', value=True):
        try:
            found, docs = [], {}
            for match in SDFGOptimizer(sdfg).get_pattern_matches(permissive=permissive):
                found.append(match.to_json())
                docs[type(match).__name__] = match.__doc__
            for ps in passes.available_passes(False):
                if ps.CATEGORY in ('Helper', 'Analysis'):
                    continue
                docs[ps.__name__] = ps.__doc__
                found.append(ps().to_json())
            return {'transformations': found, 'docstrings': docs}
        except Exception as exc:
            return _error('Failed to load transformations', exc)


def apply_transformations(sdfg_json, xforms):
    import dace
    from dace import serialize
    from dace.transformation.pass_pipeline import Pass, Pipeline
    from dace.transformation.transformation import PatternTransformation
    try:
        sdfg = _load(sdfg_json)
    except Exception as exc:
        return _error('Failed to parse the provided SDFG', exc)
    for xj in xforms:
        try:
            xf = serialize.from_json(xj)
        except Exception as exc:
            return _error('Failed to parse the applied transformation', exc)
        try:
            if isinstance(xf, PatternTransformation):
                target = sdfg.cfg_list[xf.cfg_id]
                xf._sdfg = target if isinstance(target, dace.SDFG) else target.sdfg
                xf.apply_pattern(target)
            elif isinstance(xf, Pass):
                Pipeline([xf]).apply_pass(sdfg, {})
            else:
                raise TypeError('Invalid transformation type')
        except Exception as exc:
            return _error('Failed to apply the transformation to the SDFG', exc)
    return {'sdfg': sdfg.to_json()}


def expand_library_node(sdfg_json, nodeid):
    try:
        sdfg = _load(sdfg_json)
        if nodeid is None:
            sdfg.expand_library_nodes()
        else:
            cfg_id, state_id, node_id = nodeid
            g = sdfg.cfg_list[cfg_id]
            state = g.node(state_id)
            state.node(node_id).expand(g, state)
        return {'sdfg': sdfg.to_json()}
    except Exception as exc:
        return _error('Failed to expand library node', exc)


def reapply_history_until(sdfg_json, index):
    sdfg = _load(sdfg_json)
    original = sdfg.orig_sdfg
    for i in range(index + 1):
        xf = sdfg.transformation_hist[i]
        try:
            target = original.cfg_list[xf.cfg_id]
            xf._sdfg = target
            xf.apply_pattern(target)
        except Exception as exc:
            return _error(f'Failed to play back the transformation history at point {i + 1}', exc)
    return {'sdfg': original.to_json()}


def serve(portfile):
    from flask import Flask, request
    from werkzeug.serving import make_server
    import dace  # noqa: F401  (the backend imports DaCe at start; sdfgsparse comes later)
    app = Flask('DaCeInterface')
    routes = {
        '/add_transformations': lambda j: add_transformations(j['paths']),
        '/transformations': lambda j: transformations(j['sdfg'], j['permissive']),
        '/apply_transformations': lambda j: apply_transformations(j['sdfg'], j['transformations']),
        '/expand_library_node': lambda j: expand_library_node(j['sdfg'], j.get('nodeid')),
        '/reapply_history_until': lambda j: reapply_history_until(j['sdfg'], j['index']),
    }
    for path, handler in routes.items():
        app.add_url_rule(path, path, (lambda h: lambda: h(request.get_json()))(handler), methods=['POST'])
    app.add_url_rule('/get_metadata', 'get_metadata', metadata, methods=['GET'])
    server = make_server('127.0.0.1', 0, app, threaded=False)
    with open(portfile + '.tmp', 'w') as f:
        f.write(str(server.server_port))
    import os
    os.replace(portfile + '.tmp', portfile)
    server.serve_forever()


if __name__ == '__main__':
    serve(sys.argv[1])
