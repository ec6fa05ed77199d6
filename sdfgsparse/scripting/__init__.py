"""SDFG-level scripting from the command line: ``sdfgsparse xforms``, ``optimize``,
``annotate`` and ``run`` on saved SDFG files (:mod:`.commands`), with the argument and
result files they read and write (:mod:`.files`)."""
from sdfgsparse.scripting.commands import add_parsers, quiet_dace

__all__ = ['add_parsers', 'quiet_dace']
