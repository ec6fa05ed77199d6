"""The benchmark suite: ``sdfgsparse bench`` (also ``python -m sdfgsparse.bench.cli bench``).

sdfgsparse's generated kernels against scipy.sparse, torch.sparse, python-graphblas,
pydata/sparse and MKL (``sparse_dot_mkl``), all in one process, every result checked
against scipy. One concept per module:

- ``cli``       the sub-command (``add_parser``, ``run``), thread set-up by re-execution
- ``runner``    one run: STREAM, compile times, every kernel × matrix × system
- ``kernels``   kernel definitions: inputs, scipy reference, flops, compulsory bytes, checks
- ``programs``  sdfgsparse's ``@dace.program`` per kernel and its compile-time measurement;
                ``--optimize``: the same programs through ``ss.optimize`` (``sdfgsparse-opt``)
- ``peers``     one adapter per peer library
- ``matrices``  Matrix Market loading, R-MAT and banded generators, the default set
- ``stream``    STREAM triad bandwidth
- ``timing``    interleaved timing, statistics, peak memory of a call
- ``results``   result records and their JSON form
- ``report``    the text report; ``plot`` the PNG; ``progress`` the terminal progress bar
- ``errors``    option errors (``ValueError`` subclasses naming the option)

Importing this package imports nothing heavy; the modules import DaCe and the peers.
"""
