"""DaCe warnings that say nothing a user of sdfgsparse can act on, and the context in which
sdfgsparse hides them while it lowers, parses, generates and builds code.

:data:`BENIGN` lists each warning (DaCe 1.0.2) by message, category and module, with the
reason it is benign for the programs sdfgsparse builds. :func:`benign_dace_warnings` hides
exactly those, for as long as it is entered: a warning of another module (the user's own,
sdfgsparse's ``CopyWarning``), another category or another message is shown (or recorded,
or raised under ``-W error``) as before. Nothing is filtered outside it.

Threads: ``warnings.catch_warnings`` saves the process-wide filter list on entry and puts
that copy back on exit, so two threads inside it at once lose each other's filters (or keep
one for good). The context does not snapshot: the first thread to enter inserts the
filters (one tuple object each, made once) at the front of ``warnings.filters``, later
entries only count, and the last exit removes exactly those objects, under a lock of its
own, whatever else the list gained meanwhile; compiles of different threads run
concurrently. While any thread is inside, the benign DaCe warnings are hidden in every
thread (they name nothing else). A ``catch_warnings`` block of another thread that spans
an exit can put the filters back on its own exit; the next exit removes them again.
"""
import re
import warnings
from dataclasses import dataclass
from typing import Optional, Tuple, Type

from sdfgsparse._scoped import CountedScope

__all__ = ['BenignWarning', 'BENIGN', 'benign_dace_warnings', 'benign']


@dataclass(frozen=True)
class BenignWarning:
    """One DaCe warning sdfgsparse hides: ``message`` and ``module`` are regular
    expressions matched at the start of the message (case-insensitively) and of the
    warning's module name, as ``warnings.filterwarnings`` matches them."""
    message: str
    category: Type[Warning]
    module: str
    reason: str


#: The warnings :func:`benign_dace_warnings` hides, each with why it is benign.
BENIGN: Tuple[BenignWarning, ...] = (
    BenignWarning(
        r'Variable-length array \S+ with size .* detected and was allocated on heap instead of StorageType\.Register',
        UserWarning, r'dace\.codegen\.targets\.cpu',
        'the transients of sparse kernels are sized by the data (rows, stored entries); on the heap is where they '
        'belong, a stack array of that size could overflow'),
    BenignWarning(
        r'Cannot find appropriate memlet pattern to propagate', UserWarning, r'dace\.sdfg\.propagation',
        'loops over stored entries have data-dependent bounds (pos[i]:pos[i+1]); DaCe then widens the memlet to the '
        'whole array, which is correct, and nothing in sdfgsparse relies on the narrower range'),
    BenignWarning(
        r"SDFG '.*' is already loaded by another object, recompiling under a different name",
        UserWarning, r'dace\.sdfg\.sdfg',
        'sdfgsparse names build folders by content, so an identical program compiled again in one process finds '
        "the first one's library loaded; DaCe builds a renamed copy, as stock DaCe builds every new SDFG object"),
    BenignWarning(
        r'Library \S+ already loaded, renaming file', UserWarning, r'dace\.codegen\.compiled_sdfg',
        'a program loaded again in one process (the same build folder, see above): DaCe loads a copy of the '
        'library under another file name, the same code'),
    BenignWarning(
        r'Found schedule ScheduleType\.Sequential on \S+ node in FPGA code', UserWarning,
        r'dace\.codegen\.targets\.fpga',
        'a sequential map inside an FPGA kernel is generated as an HLS loop, which is sequential anyway'),
    BenignWarning(
        r'Unused properties: CATEGORY$', UserWarning, r'dace\.serialize',
        "every pass loaded from JSON (history, the VS Code extension, sdfgsparse xforms) says so: DaCe's "
        'Pass.to_json writes the class attribute CATEGORY, which from_json does not read back'),
)

#: The filter entries (``warnings.filters`` tuples), made once: removed by identity.
_FILTERS = tuple(('ignore', re.compile(b.message, re.I), b.category, re.compile(b.module), 0) for b in BENIGN)


def benign(message: str, category: Type[Warning], module: str) -> Optional[BenignWarning]:
    """The entry of :data:`BENIGN` that a warning with this message, category and module
    (its ``__name__``) matches, or None."""
    for b, (_, msg, cat, mod, _) in zip(BENIGN, _FILTERS):
        if issubclass(category, cat) and msg.match(message) and mod.match(module):
            return b
    return None


#: What ``warnings.filterwarnings`` calls after changing the list (the C module caches by version).
_mutated = getattr(warnings, '_filters_mutated', None) or getattr(warnings, '_filters_mutated_lock_held', lambda: None)


def _remove() -> None:
    warnings.filters[:] = [f for f in warnings.filters if not any(f is ours for ours in _FILTERS)]
    _mutated()


def _install() -> None:
    _remove()  # (put back by another thread's catch_warnings: not twice)
    warnings.filters[:0] = _FILTERS
    _mutated()


_SCOPE = CountedScope(_install, _remove)


def benign_dace_warnings():
    """A context in which the warnings of :data:`BENIGN` are not shown (see the module;
    re-entrant, thread-safe)."""
    return _SCOPE
