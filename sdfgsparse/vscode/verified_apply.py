"""The editor applies a transformation only when its result is proven unchanged.

The DaCe VS Code extension's backend applies the transformations the editor sends with
``apply_transformations(sdfg_json, transformation_json_list)`` (in
``backend/dace_vscode/transformations.py`` of spcl/dace-vscode; its Flask route
``/apply_transformations`` looks the function up in that module on every request), and
returns ``{'sdfg': ...}``, which the editor writes into the document, or ``{'error':
{'message', 'details'}}``, which it shows and leaves the document as it was.
:func:`install` (called by :mod:`sdfgsparse.vscode.loader`, which that same module
imports as a custom-transformations file) replaces the function, in the backend process
only, by one that calls the backend's own and then runs the SDFG before and after on
small random inputs of the declared shapes and formats
(:func:`sdfgsparse.scripting.verify.verify_transformation`, as ``sdfgsparse xforms
apply`` does). A transformation that changes an output (``MapTiling`` with
``tile_sizes=[-1]`` validates and computed another result) comes back as an error naming
the transformation, the output and the maximum difference, and the document keeps its
SDFG; so does one whose result cannot be checked (unverified is not verified).

Verification compiles the program before and after (the DaCe cache, ``DACE_cache=hash``
as ``sdfgsparse vscode-setup`` sets it, keeps the builds: the unchanged SDFG is built
once); requests are verified one at a time (two builds of one SDFG must not share a build
folder). ``SDFGSPARSE_VSCODE_VERIFY=0`` (also ``off``, ``false``, ``no``) in the
backend's environment applies without the check; any other value checks.
"""
import json
import os
import sys
import threading
import traceback
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional

import dace

from sdfgsparse import errors
from sdfgsparse.scripting.verify import ResultChangedError, VerificationError, verify_transformation

__all__ = ['ENV', 'ENTRY', 'enabled', 'verified', 'install', 'installed', 'install_in_importer', 'VSCodeVerifyError']

#: the environment variable that turns the check off (``0``, ``off``, ``false``, ``no``)
ENV = 'SDFGSPARSE_VSCODE_VERIFY'
#: the backend's function that applies transformations (module attribute, looked up per request)
ENTRY = 'apply_transformations'
#: the backend's module that holds it in spcl/dace-vscode (and imports custom transformations)
BACKEND_MODULE = 'dace_vscode.transformations'

_OFF = ('0', 'off', 'false', 'no')
_MARK = '_sdfgsparse_verified'
_lock = threading.Lock()  # one verification at a time: builds of one SDFG share a folder


class VSCodeVerifyError(errors.SparseError, TypeError):
    """The backend module has no function to wrap."""


def enabled() -> bool:
    """Whether transformations applied in the editor are verified (:data:`ENV`)."""
    return os.environ.get(ENV, '').strip().lower() not in _OFF


def _names(transformation_json_list) -> str:
    """The transformations of a request as the editor names them (``MapTiling``,
    ``MapTiling, SparseFusion``)."""
    items = transformation_json_list if isinstance(transformation_json_list, list) else []
    names = [str(x.get('transformation') or x.get('type') or '?') if isinstance(x, dict) else '?' for x in items]
    return ', '.join(names) or 'the transformation'


def _ascii(text: str) -> str:
    # the extension reads a response until its string length reaches Content-Length (bytes):
    # a non-ASCII character would leave it waiting
    return text.encode('ascii', 'backslashreplace').decode('ascii')


def _refusal(what: str, details: str, why: str) -> Dict[str, Any]:
    return {'error': {'message': _ascii(f'{what} not applied: {why}'),
                      'details': _ascii(f'{details} ({ENV}=0 in the backend\'s environment applies without this '
                                        'check)')}}


def _as_sent(sdfg_json: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ``sdfg_json`` as it travels to the editor (JSON text: integer keys such
    as the scope dictionary's -1 become strings)."""
    return json.loads(json.dumps(sdfg_json))


def check(before_json: Dict[str, Any], after_json: Dict[str, Any], what: str) -> Optional[Dict[str, Any]]:
    """None when the SDFG ``after_json`` computes what ``before_json`` does; else the
    error the editor shows (the transformation, the output, the maximum difference)."""
    try:
        before = dace.SDFG.from_json(_as_sent(before_json))
        after = dace.SDFG.from_json(_as_sent(after_json))
        with _lock:
            verify_transformation(before, after, what)
    except ResultChangedError as exc:
        return _refusal(what, str(exc), f'it changes the output {exc.output} (by up to {exc.difference:.6g})')
    except VerificationError as exc:
        return _refusal(what, str(exc), 'its result could not be verified')
    except Exception as exc:  # the check itself failed: the result is not proven, so not applied
        traceback.print_exc(file=sys.stderr)
        first = (str(exc).strip().splitlines() or [''])[0]
        return _refusal(what, f'{what}: cannot check the result ({type(exc).__name__}: {first})',
                        'its result could not be verified')
    return None


def verified(apply: Callable) -> Callable:
    """``apply`` (the backend's ``apply_transformations``) with its result verified."""
    if getattr(apply, _MARK, False):
        return apply

    def apply_transformations(sdfg_json, transformation_json_list, *args, **kwargs):
        if not enabled() or not isinstance(sdfg_json, dict):
            return apply(sdfg_json, transformation_json_list, *args, **kwargs)
        before = _as_sent(sdfg_json)  # the backend may change what it parses
        result = apply(sdfg_json, transformation_json_list, *args, **kwargs)
        if not isinstance(result, dict) or not isinstance(result.get('sdfg'), dict) or 'error' in result:
            return result  # the backend's own failure, as it reports it
        return check(before, result['sdfg'], _names(transformation_json_list)) or result

    setattr(apply_transformations, _MARK, True)
    apply_transformations.__wrapped__ = apply
    apply_transformations.__doc__ = apply.__doc__
    return apply_transformations


def installed(module: ModuleType) -> bool:
    """Whether ``module``'s ``apply_transformations`` is the verified one."""
    return getattr(getattr(module, ENTRY, None), _MARK, False)


def install(module: ModuleType) -> None:
    """Replace ``module.apply_transformations`` by the verified one (idempotent)."""
    apply = getattr(module, ENTRY, None)
    if not callable(apply):
        raise VSCodeVerifyError(f'{getattr(module, "__name__", module)!r} has no function {ENTRY} to verify')
    setattr(module, ENTRY, verified(apply))


def _importer() -> Optional[ModuleType]:
    """The backend's module that is importing the loader: the innermost caller on the stack
    (importlib's frames and sdfgsparse's skipped) whose module defines :data:`ENTRY`, the
    one that loads custom-transformation files (through
    ``vscode-config/sdfgsparse_transformations.py`` too, which re-exports the loader)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get('__name__', '')
        module = sys.modules.get(name)
        if not (frame.f_code.co_filename.startswith('<frozen') or name.startswith(('importlib', 'sdfgsparse'))) \
                and module is not None and callable(getattr(module, ENTRY, None)):
            return module
        frame = frame.f_back
    return None


def install_in_importer() -> List[str]:
    """Verify the editor's applications: wrap ``apply_transformations`` in the backend's
    module that is importing the loader (the one that loads custom transformations) and in
    dace-vscode's :data:`BACKEND_MODULE` when loaded. Returns the modules wrapped; in a
    backend where neither has the function, a warning on stderr says that nothing is
    verified."""
    found = []
    for module in (_importer(), sys.modules.get(BACKEND_MODULE)):
        if module is not None and callable(getattr(module, ENTRY, None)) and module.__name__ not in found:
            install(module)
            found.append(module.__name__)
    if not found and 'dace_vscode' in sys.modules:
        print(f'sdfgsparse: the editor\'s backend has no {ENTRY} where sdfgsparse looked ({BACKEND_MODULE}); '
              'transformations applied in the editor are NOT verified', file=sys.stderr)
    return found
