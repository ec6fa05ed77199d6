"""The DaCe VS Code extension (spcl/dace-vscode) set up for sdfgsparse.

``sdfgsparse vscode-setup [WORKSPACE]`` (:func:`write_settings`) writes the workspace's
``.vscode/settings.json`` so that the extension works on first open:

* ``dace.backend.interpreterPath``: this Python (the project's ``.venv``), which runs the
  extension's backend; it has DaCe, sdfgsparse and Flask (``pip install -e '.[vscode]'``);
* ``dace.optimization.customTransformationsPaths``: :data:`LOADER`, which the backend
  imports as soon as it connects, before it fetches the property metadata or lists
  transformations, so sparse SDFGs load, list the Sparse transformations and replay
  their history without "Load custom transformations";
* ``python.defaultInterpreterPath`` and ``DACE_cache=hash`` in the integrated terminal
  (where the extension starts its backend).

The extension reads absolute paths only (no ``${workspaceFolder}``). Settings already in
the file are kept; a file that is not plain JSON (VS Code allows comments) is left
untouched and reported.
"""
import importlib.util
import json
import os
import sys
from typing import Dict, Optional

from sdfgsparse import errors

__all__ = ['LOADER', 'settings', 'write_settings', 'VSCodeSetupError']

#: the custom-transformations file the extension's backend imports
LOADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'loader.py')

_PATHS = 'dace.optimization.customTransformationsPaths'


class VSCodeSetupError(errors.SparseError):
    """The workspace settings could not be written."""


def settings(python: Optional[str] = None) -> Dict[str, object]:
    """The settings :func:`write_settings` sets (absolute paths)."""
    python = os.path.abspath(python or sys.executable)
    return {
        'dace.backend.interpreterPath': python,
        _PATHS: [LOADER],
        'python.defaultInterpreterPath': python,
        'terminal.integrated.env.linux': {'DACE_cache': 'hash'},
        'terminal.integrated.env.osx': {'DACE_cache': 'hash'},
    }


def missing_backend_packages(python: Optional[str] = None) -> list:
    """Packages the extension's backend imports that this interpreter lacks (only checked
    for the running interpreter)."""
    if python and os.path.abspath(python) != os.path.abspath(sys.executable):
        return []
    return [m for m in ('flask', 'dace') if importlib.util.find_spec(m) is None]


def write_settings(workspace: str = '.', python: Optional[str] = None) -> str:
    """Write (or update) ``<workspace>/.vscode/settings.json``; returns its path."""
    if not isinstance(workspace, (str, os.PathLike)):
        raise VSCodeSetupError(f'workspace must be a folder path, got {type(workspace).__name__}')
    workspace = os.path.abspath(workspace)
    if not os.path.isdir(workspace):
        raise VSCodeSetupError(f'workspace {workspace}: no such folder')
    if python is not None and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise VSCodeSetupError(f'--python {python}: not an executable file')
    folder = os.path.join(workspace, '.vscode')
    path = os.path.join(folder, 'settings.json')
    current = {}
    if os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            text = f.read()
        try:
            current = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise VSCodeSetupError(f'{path} is not plain JSON ({exc.msg} at line {exc.lineno}); remove its comments '
                                   'or trailing commas, or add the settings by hand (sdfgsparse vscode-setup --print)')
        if not isinstance(current, dict):
            raise VSCodeSetupError(f'{path} does not hold a JSON object')
    new = settings(python)
    for key, value in new.items():
        if key == _PATHS:  # keep the user's other custom transformations
            ours = (os.path.join('sdfgsparse', 'vscode', 'loader.py'), 'sdfgsparse_transformations.py')
            others = [p for p in current.get(key) or [] if isinstance(p, str) and not p.endswith(ours)]
            value = others + [LOADER]
        elif isinstance(value, dict) and isinstance(current.get(key), dict):
            value = {**current[key], **value}
        current[key] = value
    os.makedirs(folder, exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(current, f, indent=4)
        f.write('\n')
    os.replace(tmp, path)
    return path
