"""For "Load custom transformations" by hand in the DaCe VS Code extension (pick this
file). ``sdfgsparse vscode-setup`` makes the extension load sdfgsparse on its own at every
start instead (see ``sdfgsparse/vscode/loader.py``, which this file re-exports)."""
from sdfgsparse.vscode.loader import *  # noqa: F401,F403
from sdfgsparse.vscode.loader import TRANSFORMATIONS  # noqa: F401
