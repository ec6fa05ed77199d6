"""A ``@dace.program`` run on every process of a communicator (``ss.compile(prog,
distributed=comm)``): the program is compiled once with its distributed products and
reductions as callbacks
(:class:`~sdfgsparse.transformations.DistributeSparseProducts`), and every call runs it on
this process's rows, the callbacks bound to the halo exchange and to ``MPI_Allreduce``.

Arguments: a distributed matrix parameter takes a :class:`DistributedMatrix` or a scipy /
torch matrix (distributed with the program's ``partition`` and kept for the next call
with the same object); an array whose first dimension is the distributed size takes a
:class:`DistributedVector` or the whole array (the same on every process); other
arguments pass unchanged. Results whose first dimension is the distributed size come back
as DistributedVectors (``gather=0``: whole on rank 0, None elsewhere; ``gather='all'``:
whole on every process); the others (dot products, sums) are the same on every process.
"""
from typing import Any, Dict, Optional

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse.formats import mark_ours, parsing_ours
from sdfgsparse.runtime.call import CompiledProgram, bind_values
from sdfgsparse.distributed.collective import agree, check_comm, checksum
from sdfgsparse.distributed.matrix import DistributedMatrix, DistributedVector, distribute
from sdfgsparse.distributed.products import _exchange_and_multiply, gather
from sdfgsparse.transformations.distribute_sparse_products import DistributeSparseProducts

__all__ = ['DistributedProgram', 'compile_distributed']

_OPS = {'sum': 'SUM', 'max': 'MAX', 'min': 'MIN'}


class DistributedProgram:
    """The callable ``ss.compile(prog, distributed=comm)`` returns (see the module
    docstring). ``.sdfg``: the program with its callbacks; ``.callbacks``: what each
    callback does."""

    def __init__(self, prog, comm, partition='rows', format=None, gather=None, overlap=None, **options):
        self.prog = prog
        self.comm = check_comm(comm)
        self.partition, self.format, self.gather, self.overlap, self.options = partition, format, gather, overlap, \
            options
        if gather not in (None, 'all') and not isinstance(gather, (int, np.integer)):
            raise errors.ArgumentError(f"gather={gather!r}: expected None, a rank, or 'all'")
        self._compiled = None
        self._kept = {}
        self._failures = []

    def _build(self):
        with parsing_ours():
            sdfg = mark_ours(self.prog.to_sdfg(simplify=True))
        sdfg.name = f'{sdfg.name}_distributed'
        self.descs = {n: d for n, d in sdfg.arrays.items() if not d.transient}
        self.callbacks = DistributeSparseProducts().apply_pass(sdfg, {})
        symbol = self.callbacks['symbol']
        written = {n.data for st in sdfg.states() for n in st.data_nodes() if st.in_degree(n) > 0}
        for name in sorted(written):
            desc = self.descs.get(name)
            if desc is not None and not name.startswith('__return') and symbol in map(str, desc.shape[:1]):
                raise errors.UnsupportedOperationError(
                    f'{self.prog.name} writes its argument {name}, which is distributed (each process would '
                    'write a copy of its rows); return the result instead')
        for sub in sdfg.all_sdfgs_recursive():
            sub.openmp_sections = False  # callbacks (collectives) one after another, in program order
        self.sdfg = sdfg
        self._free = {str(s) for s in sdfg.free_symbols}
        self._compiled = CompiledProgram(sdfg).build()  # called through the one full path (runtime/call.py)
        self.params = list(self.prog.signature.parameters)

    def __call__(self, *args, **kwargs):
        error = None
        try:
            if self._compiled is None:
                self._build()
            values = self._bind(args, kwargs)
        except Exception as exc:
            error = exc
        agree(self.comm, error)
        matrices = self._matrices(values)
        call_args, layout = self._arguments(values, matrices)  # (agreed on inside)
        self._failures = []
        result = self._compiled(**call_args, **self._callback_values(matrices))
        agree(self.comm, self._failures[0] if self._failures else None)
        return self._results(result, layout)

    def _bind(self, args, kwargs) -> Dict[str, Any]:
        """The program's parameters bound as every call binds them (runtime/call.py), before
        the matrices are distributed; no size symbol by name (each process has its own)."""
        values = bind_values(self.prog.name, self.params, args, kwargs, keep_others=True)
        unexpected = sorted(set(values) - set(self.params))
        if unexpected:
            raise errors.ArgumentError(f'{self.prog.name}: unexpected argument{"s" if len(unexpected) > 1 else ""} '
                                       f'{", ".join(unexpected)}')
        return values

    def _matrices(self, values) -> Dict[str, DistributedMatrix]:
        """The distributed matrices of this call (collective where one must be distributed)."""
        out = {}
        for name in sorted({m for m, _ in self.callbacks['products'].values()}):
            value = values[name]
            if isinstance(value, DistributedMatrix):
                out[name] = value
                continue
            if not hasattr(value, 'shape') and not hasattr(value, 'to_sparse_csr'):
                value = None  # distribute names the argument and its type, on every process
            kept = self._kept.get(name)
            if kept is not None and kept[0] is value:
                out[name] = kept[1]
                continue
            D = distribute(value, self.comm, partition=self.partition, format=self.format, overlap=self.overlap,
                           **self.options)
            if kept is not None:
                kept[1].free()
            self._kept[name] = (value, D)
            out[name] = D
        return out

    def _arguments(self, values, matrices):
        symbol = self.callbacks['symbol']
        layout, error = None, None
        try:
            for name, D in matrices.items():
                if not isinstance(D, DistributedMatrix) or D.comm is not self.comm:
                    raise errors.ArgumentError(f'{name}: a DistributedMatrix of another communicator')
                if D.shape[0] != D.shape[1] or not D.row_layout.same_as(D.col_layout):
                    raise errors.ShapeError(f'{name}: {D.shape[0]}x{D.shape[1]} ({D.partition}); a distributed '
                                            'program needs square matrices distributed alike by rows and columns')
                if layout is not None and not D.row_layout.same_as(layout):
                    raise errors.ShapeError(f'{name}: distributed unlike the program\'s other matrix (another '
                                            'partition of the rows); distribute them alike')
                layout = D.row_layout
        except Exception as exc:
            error = exc
        agree(self.comm, error)
        call = {}
        # every other argument must be the same on every process (a whole vector each takes
        # its rows of, a scalar): compared by checksum in the agreement below
        digests = {name: 0 for name in sorted(values) if name not in matrices and name in self.descs}
        try:
            for name, value in values.items():
                if name in matrices or name not in self.descs:
                    continue
                if not isinstance(value, DistributedVector) and value is not None and \
                        not isinstance(value, (str, bytes)):
                    digests[name] = 1 + checksum(np.asarray(value))
                desc = self.descs[name]
                shape = [str(s) for s in getattr(desc, 'shape', ())]
                if layout is not None and shape and shape[0] == symbol and isinstance(desc, dace.data.Array):
                    local = _local_rows(value, layout, name, len(shape))
                    call[name] = np.ascontiguousarray(local, desc.dtype.as_numpy_dtype())
                else:
                    call[name] = value
        except Exception as exc:
            error = exc
        agree(self.comm, error, same={f'{name} (checksum; 0: a DistributedVector)': d for name, d in digests.items()})
        # the other sizes the full path takes from the arrays; the distributed one may size
        # only the matrix, which the callbacks hold
        if symbol is not None and layout is not None and symbol in self._free:
            call[symbol] = len(layout)
        return call, layout

    def _callback_values(self, matrices):
        from mpi4py import MPI
        out = {}
        for name, (matrix, kind) in self.callbacks['products'].items():
            out[name] = self._product(matrices[matrix], kind == 'spmm')
        for name, op in self.callbacks['reductions'].items():
            out[name] = self._allreduce(getattr(MPI, _OPS[op]))
        return out

    def _product(self, D, block):
        def product(x, y):
            try:
                with D._lock:
                    y[...] = _exchange_and_multiply(D, np.ascontiguousarray(x, D.dtype), block, self.overlap).local
            except BaseException as exc:  # raised after the call, on every process (see __call__)
                self._failures.append(exc)
                y[...] = np.nan
        return product

    def _allreduce(self, op):
        comm = self.comm

        def allreduce(partial, out=None):
            # buffers, not pickled objects: MPI applies MAX / MIN element-wise, and a
            # failure before the call is the only local one (the reduction itself is MPI's)
            send = np.ascontiguousarray(np.asarray(partial, np.float64 if out is None else out.dtype).reshape(-1))
            result = np.empty_like(send)
            comm.Allreduce(send, result, op=op)
            if out is None:
                return result[0]
            try:
                out[...] = result.reshape(out.shape)
            except BaseException as exc:
                self._failures.append(exc)
        return allreduce

    def _results(self, result, layout):
        if result is None:
            return None
        single = not isinstance(result, tuple)
        items = (result, ) if single else result
        names = sorted(n for n in self.descs if n.startswith('__return'))  # DaCe's order of return values
        symbol = self.callbacks['symbol']
        out = []
        for name, value in zip(names, items):
            shape = [str(s) for s in self.descs[name].shape]
            if layout is not None and shape and shape[0] == symbol:
                vec = DistributedVector(np.asarray(value), layout)
                if self.gather is not None:
                    vec = gather(vec, root=None if self.gather == 'all' else int(self.gather))
                out.append(vec)
            else:
                out.append(value)
        return out[0] if single else tuple(out)


def _local_rows(value, layout, name, ndim):
    if isinstance(value, DistributedVector):
        if not value.layout.same_as(layout):
            raise errors.ShapeError(f'{name}: a distributed vector of another layout (the rows of another '
                                    'matrix or partition: pass the DistributedMatrix it came from)')
        return value.local
    if value is None or isinstance(value, (str, bytes)):
        raise errors.ArgumentError(f'{name}: expected an array or a DistributedVector, got {type(value).__name__}')
    arr = np.asarray(value)
    if arr.ndim != ndim or arr.shape[0] != layout.size:
        raise errors.ShapeError(f'{name}: shape {arr.shape}; its first dimension is the distributed one '
                                f'({layout.size} rows)')
    return arr[layout.own]


def compile_distributed(prog, comm, partition: str = 'rows', format=None, gather: Optional[Any] = None,
                        overlap=None, **options) -> DistributedProgram:
    """``prog`` to run on every process of ``comm`` (see the module docstring); compiled at
    the first call."""
    if not isinstance(prog, dace.frontend.python.parser.DaceProgram):
        raise errors.ArgumentError(f'compile(..., distributed=comm) takes a @dace.program, got {type(prog).__name__}')
    return DistributedProgram(prog, comm, partition, format, gather, overlap, **options)
