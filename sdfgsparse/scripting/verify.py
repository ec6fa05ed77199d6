"""Differential verification of a transformed SDFG, as FuzzyFlow does: run the SDFG before
and after on small generated inputs of the declared shapes and formats, and compare every
returned value and every argument the program writes.

:func:`verify_transformation` draws small symbol values (2 to 9) for the symbols no
argument fixes by its shape alone, then each argument from its descriptor: a random
sparse matrix (density 0.3, with empty rows, seeded) converted to the declared format and
dtypes, a dense array of the declared shape and dtype (integers in ``[0, smallest size)``,
so that index arrays stay in range), a number for a scalar. Both SDFGs are compiled and
called with copies of the same inputs (each sparse one in the format the SDFG declares:
a format selection changes it), ``trials`` times; the first output that differs
beyond rounding (``rtol`` for the dtype) is a :class:`VerificationError` naming the
transformation, the output and the maximum difference. Returned arrays start filled with
NaN (integers: the type's extreme), so an entry a program never writes cannot agree by
reading stale memory. What cannot be run here (a
GPU-lowered SDFG, an argument of a kind we cannot generate, a build failure) is a
:class:`VerificationError` too: unverified is not verified.
"""
import copy
from typing import Any, Dict, List, Optional, Tuple

import dace
import numpy as np
import scipy.sparse as sp
from dace.codegen.exceptions import CompilationError

from sdfgsparse import errors
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.runtime.arguments import written_arguments
from sdfgsparse.runtime.call import CompiledProgram
from sdfgsparse.runtime.capacity import PREFIX
from sdfgsparse.runtime.container import SparseMatrix
from sdfgsparse.runtime.host_convert import convert
from sdfgsparse.targets.cuda.lower import is_lowered
from sdfgsparse.transformations.examples import bind_sizes

__all__ = ['VerificationError', 'ResultChangedError', 'random_arguments', 'verify_transformation', 'outputs']


class VerificationError(errors.SparseError, RuntimeError):
    """A transformation changed what the program computes, or could not be checked."""


class ResultChangedError(VerificationError):
    """A transformation changed what the program computes: ``output`` (its name) differs
    by up to ``difference`` (infinite for a shape that differs or an output that is gone)."""

    def __init__(self, message: str, output: str, difference: float):
        super().__init__(message)
        self.output = output
        self.difference = difference


def _evaluate(expr, symbols: Dict[str, int]) -> int:
    value = dace.symbolic.pystr_to_symbolic(str(expr)) if not isinstance(expr, (int, np.integer)) else expr
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = value.subs({dace.symbolic.symbol(k): v for k, v in symbols.items()})
    try:
        return int(value)
    except TypeError:
        raise VerificationError(f'cannot size {expr} from the symbols {symbols}') from None


def _symbols(sdfg: dace.SDFG, rng: np.random.Generator) -> Dict[str, int]:
    names = sorted(set(map(str, sdfg.free_symbols)) | {str(s) for n in _arg_names(sdfg)
                                                         for s in _desc_symbols(sdfg.arrays[n])})
    return {s: int(rng.integers(2, 10)) for s in names if not s.startswith(PREFIX)}


def _desc_symbols(desc) -> List[str]:
    if is_sparse_desc(desc):
        return [str(s) for s in sparse_type_of(desc).free_symbols]
    return [str(s) for s in getattr(desc, 'free_symbols', ())]


def _arg_names(sdfg: dace.SDFG) -> List[str]:
    if sdfg.arg_names:
        return list(sdfg.arg_names)
    return [n for n, d in sdfg.arrays.items() if not d.transient and not n.startswith('__return')]


def _dense(rng, shape, dtype: np.dtype, smallest: int):
    if dtype.kind == 'b':
        return rng.random(shape) < 0.5
    if dtype.kind in 'iu':
        return rng.integers(0, max(1, smallest), size=shape).astype(dtype)
    if dtype.kind == 'c':
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def random_arguments(sdfg: dace.SDFG, seed: int = 0) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """``({argument: value}, {symbol: value})``: small random inputs of the declared shapes,
    formats and dtypes (module docstring), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    symbols = _symbols(sdfg, rng)
    smallest = min(symbols.values(), default=4)
    values: Dict[str, Any] = {}
    for name in _arg_names(sdfg):
        desc = sdfg.arrays[name]
        if is_sparse_desc(desc):
            st = sparse_type_of(desc)
            rows, cols = _evaluate(st.rows, symbols), _evaluate(st.cols, symbols)
            A = sp.random_array((rows, cols), density=0.3, format='csr', rng=rng)
            if rows > 2:
                A = sp.csr_array(A.multiply((np.arange(rows) % 3 != 1)[:, None]))  # empty rows
            A = sp.coo_array(A)
            A.data = _dense(rng, A.data.shape, np.dtype(st.dtype.type), smallest)
            values[name] = convert(A, desc)
        elif isinstance(desc, dace.data.Scalar):
            values[name] = _dense(rng, (), np.dtype(desc.dtype.as_numpy_dtype()), smallest)[()]
        elif isinstance(desc, dace.data.Array):
            shape = tuple(_evaluate(s, symbols) for s in desc.shape)
            values[name] = _dense(rng, shape, np.dtype(desc.dtype.as_numpy_dtype()), smallest)
        else:
            raise VerificationError(f'cannot generate an input for {name} ({type(desc).__name__})')
    return values, symbols


def outputs(sdfg: dace.SDFG, values: Dict[str, Any], symbols: Dict[str, int]) -> Dict[str, np.ndarray]:
    """Compile ``sdfg`` and call it on copies of ``values``: ``{output: dense array}`` for
    each returned value (``result``, ``result_0`` ...) and each argument it writes."""
    args = copy.deepcopy(values)
    for name, value in args.items():  # in this SDFG's formats (a format selection changes them), as a call converts
        if name in sdfg.arrays and is_sparse_desc(sdfg.arrays[name]):
            args[name] = convert(value, sdfg.arrays[name])
    bound = bind_sizes(sdfg, args)
    returned = _marked_returns(sdfg, {**symbols, **bound})
    program = CompiledProgram(sdfg)
    try:
        # content-named builds: the SDFG before and after share a name, not a build folder,
        # and a later check of the same SDFG (the next trial, the next apply) reuses its build
        with dace.config.set_temporary('cache', value='hash'):
            program.build()
    except CompilationError as exc:
        text = str(exc).strip().splitlines()
        raise VerificationError(f'{sdfg.name} does not compile ({text[0] if text else type(exc).__name__})') from None
    result = program(**args, **returned, **{k: v for k, v in symbols.items() if k not in bound})
    out: Dict[str, np.ndarray] = {}
    got = [] if result is None else list(result) if isinstance(result, tuple) else [result]
    for i, value in enumerate(got):
        out['result' if len(got) == 1 else f'result_{i}'] = _as_dense(value)
    for name in sorted(written_arguments(sdfg)):
        if name in args and not name.startswith('__return'):
            out[name] = _as_dense(args[name])
    return out


def _marked_returns(sdfg: dace.SDFG, sizes: Dict[str, int]) -> Dict[str, np.ndarray]:
    """Buffers for the dense values the program returns, filled with a mark (NaN, the
    integer type's extreme) that no output shares: an entry the program leaves unwritten
    reads as the mark, not as whatever the allocator handed back (the buffer the SDFG run
    just before freed holds that SDFG's result: MapTiling with tile_sizes=[-1], which
    writes nothing, then agreed with it). Returns whose size or layout cannot be made here
    are left to the runtime."""
    marked = {}
    for name, desc in sdfg.arrays.items():
        if not name.startswith('__return') or desc.transient or type(desc) is not dace.data.Array:
            continue
        dtype = np.dtype(desc.dtype.as_numpy_dtype())
        if dtype.kind not in 'fciu':
            continue
        try:
            shape = tuple(_evaluate(s, sizes) for s in desc.shape)
            strides = tuple(_evaluate(s, sizes) for s in desc.strides)
        except VerificationError:
            continue
        contiguous = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
        if any(d != c for d, c, n in zip(strides, contiguous, shape) if n > 1):
            continue
        mark = np.nan if dtype.kind in 'fc' else np.iinfo(dtype).min if dtype.kind == 'i' else np.iinfo(dtype).max
        marked[name] = np.full(shape, mark, dtype=dtype)
    return marked


def _as_dense(value) -> np.ndarray:
    if isinstance(value, SparseMatrix):
        value = value.to_scipy()
    if sp.issparse(value):
        value = value.toarray()
    return np.array(value)


def _difference(a: np.ndarray, b: np.ndarray) -> Optional[float]:
    """The maximum difference of ``a`` and ``b`` when it is beyond rounding, else None
    (a shape that differs is an infinite difference)."""
    if a.shape != b.shape:
        return float('inf')
    if a.size == 0:
        return None
    if a.dtype.kind in 'fc' or b.dtype.kind in 'fc':
        rtol = 1e-4 if np.finfo(np.result_type(a.dtype, b.dtype, np.float32)).bits <= 32 else 1e-9
        diff = np.abs(a.astype(np.complex128) - b.astype(np.complex128))
        both_nan = np.isnan(a) & np.isnan(b)
        scale = max(1.0, float(np.nanmax(np.abs(a))) if np.isfinite(a).any() else 1.0)
        one_nan = np.isnan(a) != np.isnan(b)  # a number against NaN (or an unwritten entry): infinitely far
        bad = (diff > rtol * scale) & ~both_nan | one_nan
        return float(np.nanmax(np.where(both_nan, 0, np.where(one_nan, np.inf, diff)))) if bad.any() else None
    if not np.array_equal(a, b):
        return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    return None


def _unwritten(a: np.ndarray, b: np.ndarray) -> str:
    """``': K of N entries are ...'`` for the entries holding the mark of
    :func:`_marked_returns` (or NaN) on one side only; '' when there are none."""
    if a.shape != b.shape or a.dtype.kind not in 'fciu' or b.dtype.kind not in 'fciu':
        return ''

    def marked(x):
        if x.dtype.kind in 'fc':
            return np.isnan(x)
        return x == (np.iinfo(x.dtype).min if x.dtype.kind == 'i' else np.iinfo(x.dtype).max)

    k = int(np.count_nonzero(marked(a) != marked(b)))
    return f': {k} of {a.size} entries are NaN or never written on one side only' if k else ''


def verify_transformation(before: dace.SDFG, after: dace.SDFG, what: str, trials: int = 2, seed: int = 0) -> int:
    """Run ``before`` and ``after`` (the SDFG before and after the transformation ``what``)
    on ``trials`` sets of random inputs; :class:`VerificationError` at the first output
    that differs, or when they cannot be run. Returns the number of outputs compared
    (in each trial)."""
    if is_lowered(before) or is_lowered(after):
        raise VerificationError(f'{what}: the SDFG is lowered for the GPU; its result cannot be checked here')
    compared = 0
    for trial in range(trials):
        try:
            values, symbols = random_arguments(before, seed + trial)
            want = outputs(before, values, symbols)
            got = outputs(after, values, symbols)
        except (VerificationError, errors.SparseError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise VerificationError(f'{what}: cannot check the result ({first})') from None
        for name in want:
            if name not in got:
                raise ResultChangedError(f'{what}: the output {name} is gone after it', name, float('inf'))
            diff = _difference(want[name], got[name])
            if diff is not None:
                sizes = ', '.join(f'{k}={v}' for k, v in symbols.items() if k.isalpha())
                raise ResultChangedError(f'{what} changes the result: output {name} differs by up to {diff:.6g}'
                                         f'{_unwritten(want[name], got[name])} '
                                         f'(random inputs, seed {seed + trial}{", " + sizes if sizes else ""})',
                                         name, diff)
        compared = len(want)
    return compared
