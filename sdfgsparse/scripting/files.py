"""Files of the SDFG command line: SDFGs, argument files and result files.

What an argument file becomes (see :func:`read_argument`):

- ``.mtx`` / ``.mtx.gz`` (Matrix Market) holds a *matrix*, whatever the program stores it
  in: it becomes what the parameter declares: the declared sparse format with its value
  and index dtypes (``ss.convert``; duplicates summed), or a dense NumPy array of the
  declared dtype. (The file format has no precision of its own.) Pattern files read as
  ones. A value the declared dtype cannot hold (a fraction or an out-of-range integer for
  an integer type, a finite value that would overflow a float type) is an error.
- ``.npy`` holds an *array*: passed as stored (``numpy.load(allow_pickle=False)``) and
  checked like a Python argument, so another dtype or shape is an error (a 0-d one is a
  number for a scalar parameter, of the declared dtype).
- anything else is a literal for a scalar parameter (``alpha=1.5``, ``n=3``, ``flag=true``).

Results (see :func:`write_result`): dense ones to ``.npy`` (``numpy.save``) or ``.mtx``,
sparse ones (scipy or ``ss.SparseMatrix``) to ``.mtx`` (``scipy.io.mmwrite``).
"""
import difflib
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import dace
import numpy as np

from sdfgsparse import errors
from sdfgsparse.formats import is_sparse_desc, sparse_type_of
from sdfgsparse.scripting.sdfg_grammar import UnsafeSDFGError
from sdfgsparse.scripting.sdfg_schema import check_sdfg_json

__all__ = [
    'ScriptingError', 'load_sdfg', 'save_sdfg', 'argument_names', 'result_names', 'describe', 'split_assignment',
    'stem', 'read_argument', 'read_arguments', 'folder_arguments', 'parse_json_value', 'write_result', 'summary',
    'result_paths', 'close_names', 'check_output', 'available_memory', 'MATRIX_SUFFIXES', 'ARRAY_SUFFIXES'
]

#: Suffixes of argument files, longest first (a stem drops the first that matches).
MATRIX_SUFFIXES = ('.mtx.gz', '.mtx')
ARRAY_SUFFIXES = ('.npy', )
RESULT_SUFFIXES = ('.npy', '.mtx')


class ScriptingError(errors.ArgumentError):
    """A file or a command-line value cannot be used as asked. ``hint`` (or None) says
    what to do instead; the command line prints it on a line of its own."""

    def __init__(self, message: str, hint: Optional[str] = None):
        super().__init__(message)
        self.hint = hint


def close_names(name: str, known: Sequence[str], n: int = 3) -> List[str]:
    """Up to ``n`` names of ``known`` close to ``name`` (case-insensitive), best first."""
    lower = {k.lower(): k for k in known}
    return [lower[m] for m in difflib.get_close_matches(name.lower(), list(lower), n=n, cutoff=0.5)]


def load_sdfg(path: str) -> dace.SDFG:
    """The SDFG saved in ``path`` (``.sdfg`` or ``.sdfgz``); :class:`ScriptingError` when
    there is no such file, it holds no SDFG, or it is not of DaCe's schema or holds a string
    outside its kind's grammar (:mod:`sdfgsparse.scripting.sdfg_schema`, checked before DaCe
    parses it)."""
    if not os.path.exists(path):
        raise ScriptingError(f'{path}: no such file')
    if os.path.isdir(path):
        raise ScriptingError(f'{path}: is a folder, not an SDFG file')
    with open(path, 'rb') as f:
        head = f.read(64)
    if not head.startswith(b'\x1f\x8b') and not head.lstrip().startswith(b'{'):
        raise ScriptingError(f'{path}: not an SDFG file (an SDFG is saved as JSON, or gzip-compressed JSON)',
                             hint='save one with prog.to_sdfg().save("prog.sdfg")')
    # JSON only: DaCe's SDFG.from_file unpickles what is not JSON, which runs code a file names
    import gzip
    import json
    try:
        with (gzip.open if head.startswith(b'\x1f\x8b') else open)(path, 'rb') as f:
            content = json.loads(f.read())
        if not isinstance(content, dict):
            raise ValueError(f'JSON {type(content).__name__}, not an object')
        if content.get('type') != 'SDFG':
            raise ValueError(f'a JSON object of type {str(content.get("type"))[:40]!r}, not an SDFG')
    except Exception as exc:  # any parse error of the file format (JSON, gzip)
        raise ScriptingError(f'{path}: not a readable SDFG ({_first_line(exc)})',
                             hint='save one with prog.to_sdfg().save("prog.sdfg")') from None
    try:  # before DaCe reads it: its from_json evaluates expression strings with sympify (eval)
        check_sdfg_json(content, path)
    except UnsafeSDFGError as exc:
        raise ScriptingError(str(exc)) from None
    try:
        sdfg = dace.SDFG.from_json(content)
    except Exception as exc:  # any error of DaCe's schema
        raise ScriptingError(f'{path}: not a readable SDFG ({_first_line(exc)})',
                             hint='save one with prog.to_sdfg().save("prog.sdfg")') from None
    if not isinstance(sdfg, dace.SDFG):
        raise ScriptingError(f'{path}: not a readable SDFG (it holds a {type(sdfg).__name__})')
    return sdfg


def check_output(path: str, option: str = '-o') -> None:
    """:class:`ScriptingError` unless a file can be written at ``path``: not a folder, not a
    symbolic link (writing would follow it elsewhere), in a folder that exists and is
    writable. Checked before any work, so that a long run does not end in a path that
    cannot be written; nothing is created here (a missing folder is an error)."""
    if os.path.islink(path):
        raise ScriptingError(f'{option} {path}: is a symbolic link; give the path of a file, not of a link',
                             hint='write to a new file name and move it yourself')
    if os.path.isdir(path):
        raise ScriptingError(f'{option} {path}: is a folder; give a file name')
    _check_folder(os.path.dirname(os.path.abspath(path)), f'{option} {path}')


def _check_folder(folder: str, what: str) -> None:
    """``folder`` exists and is a folder one may write in."""
    folder = os.path.abspath(folder)
    if not os.path.exists(folder):
        parent = os.path.dirname(folder)
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise ScriptingError(f'{what}: {parent} is a file, not a folder')
        raise ScriptingError(f'{what}: the folder {folder} does not exist', hint='make it first (mkdir)')
    if not os.path.isdir(folder):
        raise ScriptingError(f'{what}: {folder} is a file, not a folder')
    if not os.access(folder, os.W_OK):
        raise ScriptingError(f'{what}: cannot write in {folder} (permission denied)')


def save_sdfg(sdfg: dace.SDFG, path: str) -> None:
    """Save ``sdfg`` to ``path`` (compressed when it ends with ``.sdfgz``)."""
    check_output(path)
    try:
        sdfg.save(path, compress=path.endswith('.sdfgz'))
    except OSError as exc:
        raise ScriptingError(f'{path}: cannot write ({exc.strerror or _first_line(exc)})') from None


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f'no {exc} entry'
    if isinstance(exc, UnicodeDecodeError):
        return 'binary content, not JSON text'
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def argument_names(sdfg: dace.SDFG) -> List[str]:
    """The SDFG's arguments in call order (``arg_names``; for an SDFG built without one,
    its non-transient data other than return values)."""
    if sdfg.arg_names:
        return list(sdfg.arg_names)
    return [n for n, d in sdfg.arrays.items() if not d.transient and not n.startswith('__return')]


def result_names(sdfg: dace.SDFG) -> List[str]:
    """The SDFG's return values (``__return``, ``__return_0``, ...) in order."""
    names = [n for n, d in sdfg.arrays.items() if n.startswith('__return') and not d.transient]
    return sorted(names, key=lambda n: int(n[len('__return_'):]) if n[len('__return_'):].isdigit() else -1)


def describe(desc: dace.data.Data) -> str:
    """What a parameter takes, for messages: ``ss.CSR[float64, N, N, index=int32]``,
    ``float64 array of shape (N, K)``, ``float64 number``."""
    if is_sparse_desc(desc):
        return f'{sparse_type_of(desc)!r} (a .mtx / .mtx.gz file)'
    dtype = np.dtype(desc.dtype.as_numpy_dtype()).name
    if isinstance(desc, dace.data.Scalar):
        return f'{dtype} number'
    if isinstance(desc, dace.data.Array):
        return f'{dtype} array of shape ({", ".join(map(str, desc.shape))}{"," if len(desc.shape) == 1 else ""})'
    return f'{type(desc).__name__} {desc}'


def split_assignment(text: str, option: str) -> Tuple[str, str]:
    """``'NAME=VALUE'`` -> (NAME, VALUE); :class:`ScriptingError` naming ``option`` otherwise."""
    name, eq, value = text.partition('=')
    name = name.strip()
    if not eq or not name or not value:
        example = {'--set': 'tile_sizes=[32]', '--symbol': 'N=100'}.get(option, 'A=tests/data/cora_A.mtx.gz')
        raise ScriptingError(f'{option} {text!r}: expected {"PROP" if option == "--set" else "NAME"}=VALUE',
                             hint=f'e.g. {option} {example}')
    return name, value


def stem(path: str) -> Optional[str]:
    """The file name without its argument-file suffix (``A.mtx.gz`` -> ``A``), or None
    for another kind of file."""
    base = os.path.basename(path)
    for suffix in MATRIX_SUFFIXES + ARRAY_SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[:-len(suffix)]
    return None


def parse_json_value(text: str):
    """``text`` as JSON when it parses (``64``, ``true``, ``{"K": 64}``), else the string."""
    import json
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_argument(name: str, text: str, desc: dace.data.Data):
    """The value of parameter ``name`` (descriptor ``desc``) given on the command line as
    ``text``: a file path or a literal (see the module docstring)."""
    if os.path.isdir(text):
        raise ScriptingError(f'{name}={text}: is a folder, not a file ({name} takes {describe(desc)})')
    if text.endswith(MATRIX_SUFFIXES):
        return _read_matrix_market(name, text, desc)
    if text.endswith(ARRAY_SUFFIXES):
        value = _read_npy(name, text)
        if isinstance(desc, dace.data.Scalar) and value.ndim == 0:  # a number saved with numpy.save
            dtype = np.dtype(desc.dtype.as_numpy_dtype())
            if value.dtype != dtype:  # as an array's: no cast (DaCe's would wrap 2**40 into an int32 0)
                raise ScriptingError(f'{name}={text}: dtype is {value.dtype}, {name} takes {_a(describe(desc))}')
            return value[()]
        return value
    if isinstance(desc, dace.data.Scalar):
        return _literal(name, text, desc)
    if os.path.exists(text):
        raise ScriptingError(f'{name}={text}: unknown kind of file; give a .mtx, .mtx.gz or .npy file')
    kinds = '.mtx / .mtx.gz (Matrix Market)' if is_sparse_desc(desc) else \
        '.mtx / .mtx.gz (Matrix Market) or .npy (numpy.save)'
    raise ScriptingError(f'{name}={text}: no such file ({name} takes {describe(desc)})',
                         hint=f'{name} takes a file: {kinds}')


def read_arguments(sdfg: dace.SDFG, given: Dict[str, str]) -> Dict[str, Any]:
    """``{name: value}`` for ``{name: text}`` given on the command line; every name must
    be an argument of ``sdfg`` (:class:`ScriptingError` naming the closest ones otherwise)."""
    names = argument_names(sdfg)
    out = {}
    for name, text in given.items():
        if name not in names:
            raise _not_an_argument(sdfg, name, names)
        out[name] = read_argument(name, text, sdfg.arrays[name])
    return out


def _not_an_argument(sdfg, name, names) -> ScriptingError:
    close = close_names(name, names)
    hint = f'did you mean {" or ".join(close)}?' if close else None
    if name in set(map(str, sdfg.free_symbols)) | set(sdfg.symbols):
        hint = f'{name} is a symbol: --symbol {name}=VALUE'
    return ScriptingError(f'{name} is not an argument of {sdfg.name} (arguments: {", ".join(names) or "none"})',
                          hint=hint)


def folder_arguments(sdfg: dace.SDFG, folder: str) -> Tuple[Dict[str, str], List[str]]:
    """Files of ``folder`` named after an argument of ``sdfg`` (``A.mtx``, ``A.mtx.gz``,
    ``X.npy``): ``({argument: path}, [files matching no argument])``. Two files for one
    argument are an error."""
    if not os.path.isdir(folder):
        raise ScriptingError(f'--matrices {folder}: ' + ('is a file, not a folder' if os.path.exists(folder)
                                                         else 'no such folder'))
    names = set(argument_names(sdfg))
    found: Dict[str, str] = {}
    ignored = []
    for base in sorted(os.listdir(folder)):
        path = os.path.join(folder, base)
        s = stem(base)
        if s is None or not os.path.isfile(path):
            continue
        if s not in names:
            ignored.append(base)
            continue
        if s in found:
            raise ScriptingError(f'--matrices {folder}: two files for argument {s} ({os.path.basename(found[s])}, '
                                 f'{base})', hint='keep one, or name the file with --arg')
        found[s] = path
    return found, ignored


def available_memory() -> int:
    """Bytes this process may still allocate: the machine's available memory
    (``MemAvailable``, else free pages), and no more than the address-space limit
    (``RLIMIT_AS``) leaves beside what the process already maps."""
    avail = None
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
        except (ValueError, OSError, AttributeError):
            avail = 1 << 62  # unknown: the file checks still apply
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            with open('/proc/self/statm') as f:
                mapped = int(f.read().split()[0]) * os.sysconf('SC_PAGE_SIZE')
            avail = min(avail, max(0, soft - mapped))
    except (ImportError, OSError, ValueError):
        pass
    return avail


def _gib(n: float) -> str:
    return f'{n / 2**30:.1f} GiB' if n >= 2**28 else f'{n / 2**20:.1f} MiB'


def _check_memory(name: str, path: str, need: int, what: str, share: float = 1.0) -> None:
    """:class:`ScriptingError` when ``need`` bytes are more than ``share`` of the memory
    available (:func:`available_memory`)."""
    avail = available_memory()
    if need > avail * share:
        part = '' if share >= 1 else f' (an argument may take {share:.0%} of it: the program needs room too)'
        raise ScriptingError(f'{name}={path}: {what} would need about {_gib(need)}, and {_gib(avail)} is available'
                             f'{part}; nothing was read')


def _read_npy(name: str, path: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise ScriptingError(f'{name}={path}: no such file')
    try:
        with open(path, 'rb') as f:  # the header first: its shape against the file's size and the memory
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = np.lib.format._read_array_header(f, version, max_header_size=10000)
            offset = f.tell()
        if not dtype.hasobject:
            need = int(np.prod(shape, dtype=object)) * dtype.itemsize
            held = os.path.getsize(path) - offset
            if need > held:
                raise ScriptingError(f'{name}={path}: the header claims a {dtype} array of shape {tuple(shape)} '
                                     f'({need} bytes), the file holds {held} bytes of data')
            _check_memory(name, path, need, f'its {dtype} array of shape {tuple(shape)}')
    except (OSError, ValueError, EOFError) as exc:
        raise ScriptingError(f'{name}={path}: not a readable .npy file ({_first_line(exc)})') from None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ScriptingError(f'{name}={path}: not a readable .npy file ({_first_line(exc)})') from None


def _read_matrix_market(name: str, path: str, desc: dace.data.Data):
    import scipy.io
    import scipy.sparse as sp
    if not os.path.isfile(path):
        raise ScriptingError(f'{name}={path}: no such file')
    # by file name: scipy opens .gz itself (an open binary file aborts scipy 1.17's reader)
    try:
        rows, cols, entries, layout, field, symmetry = scipy.io.mminfo(path)
    except Exception as exc:  # scipy raises ValueError, IndexError, OSError, RuntimeError ...
        raise ScriptingError(f'{name}={path}: not a readable Matrix Market file ({_first_line(exc)})') from None
    _check_matrix_market_sizes(name, path, desc, rows, cols, entries, layout, field, symmetry)
    try:
        value = scipy.io.mmread(path)
    except Exception as exc:  # scipy raises ValueError, IndexError, OSError, RuntimeError ...
        raise ScriptingError(f'{name}={path}: not a readable Matrix Market file ({_first_line(exc)})') from None
    if field == 'complex' and desc.dtype not in (dace.complex64, dace.complex128):
        raise ScriptingError(f'{name}={path}: holds complex values; {name} takes {describe(desc)}')
    if isinstance(desc, dace.data.Scalar):
        raise ScriptingError(f'{name}={path}: {name} takes a number, not a matrix', hint=f'--arg {name}=1.5')
    if is_sparse_desc(desc):
        from sdfgsparse.runtime.host_convert import convert
        A = sp.coo_array(value) if sp.issparse(value) else sp.coo_array(np.asarray(value))
        A.sum_duplicates()
        A.data = _checked_cast(name, path, A.data, np.dtype(sparse_type_of(desc).dtype.type), desc)
        try:
            return convert(A, desc)
        except errors.SparseError as exc:
            raise ScriptingError(f'{name}={path}: {exc}') from None
    dtype = np.dtype(desc.dtype.as_numpy_dtype())
    dense = value.toarray() if sp.issparse(value) else np.asarray(value)
    if isinstance(desc, dace.data.Array) and len(desc.shape) == 1 and dense.ndim == 2 and 1 in dense.shape:
        dense = dense.reshape(-1)  # a vector is an n x 1 (or 1 x n) matrix in the file
    return np.ascontiguousarray(_checked_cast(name, path, dense, dtype, desc))


def _lines(path: str) -> int:
    """The number of lines of a (possibly gzip-compressed) text file, read in blocks."""
    import gzip
    count = 0
    last = b'\n'
    with (gzip.open if path.endswith('.gz') else open)(path, 'rb') as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            count += block.count(b'\n')
            last = block[-1:]
    return count + (last != b'\n')


def _check_matrix_market_sizes(name, path, desc, rows, cols, entries, layout, field, symmetry) -> None:
    """The sizes a Matrix Market header claims, against the entries the file holds (one a
    line) and the memory reading and converting them would take: :class:`ScriptingError`
    before anything is allocated."""
    if min(rows, cols, entries) < 0:
        raise ScriptingError(f'{name}={path}: the header claims a negative size ({rows} x {cols}, {entries} entries)')
    stored = entries if layout == 'coordinate' else rows * cols
    if layout != 'coordinate' and symmetry in ('symmetric', 'hermitian'):
        stored = rows * (rows + 1) // 2  # a symmetric array lists its lower triangle, the diagonal included
    elif layout != 'coordinate' and symmetry == 'skew-symmetric':
        stored = rows * (rows - 1) // 2  # without the diagonal
    lines = _lines(path)
    if stored > lines:
        raise ScriptingError(f'{name}={path}: the header claims {rows} x {cols} with {stored} entries, but the file '
                             f'holds {lines} lines')
    value_bytes = 16 if field == 'complex' else 8
    need = stored * (value_bytes + (16 if layout == 'coordinate' else 0))  # what scipy reads
    if is_sparse_desc(desc):  # a COO copy, then the format's arrays: pointers per row (or column) while converting
        need += 2 * stored * (value_bytes + 16) + 2 * (max(rows, cols) + 1) * 8
    elif not isinstance(desc, dace.data.Scalar):
        need += rows * cols * max(value_bytes, np.dtype(desc.dtype.as_numpy_dtype()).itemsize)  # the dense array
    entries_text = f'{stored} entr{"y" if stored == 1 else "ies"}'
    _check_memory(name, path, need, f'a {rows} x {cols} matrix with {entries_text}', share=0.5)


def _checked_cast(name: str, path: str, values: np.ndarray, dtype: np.dtype, desc) -> np.ndarray:
    """The values of a Matrix Market file as ``dtype``; :class:`ScriptingError` when one
    would change beyond rounding: a fraction, infinity or NaN into an integer type, a value
    out of an integer type's range, a finite value that overflows a float type."""
    values = np.asarray(values)
    if values.dtype == dtype or values.size == 0:
        return values
    bad, why = None, None
    if dtype.kind in 'iu':
        info = np.iinfo(dtype)
        if values.dtype.kind in 'fc':
            real = values.real
            nonint = ~np.isfinite(real) | (real != np.round(real)) | (values.imag != 0 if values.dtype.kind == 'c'
                                                                     else False)
            if nonint.any():
                bad, why = nonint, 'is not an integer'
            else:
                bad, why = (real < info.min) | (real >= float(info.max) + 1), f'is out of the range of {dtype.name}'
        else:
            bad, why = (values < info.min) | (values > info.max), f'is out of the range of {dtype.name}'
    elif dtype.kind in 'fc':
        with np.errstate(over='ignore', invalid='ignore'):
            cast = values.astype(dtype)
        bad, why = np.isfinite(values) & ~np.isfinite(cast), f'overflows {dtype.name}'
    if bad is not None and np.any(bad):
        first = values[bad].flat[0]
        raise ScriptingError(f'{name}={path}: the value {first.item()!r} {why} ({name} takes {describe(desc)})')
    with np.errstate(over='ignore', invalid='ignore'):
        return values.astype(dtype, copy=False)


def _literal(name: str, text: str, desc: dace.data.Scalar):
    dtype = np.dtype(desc.dtype.as_numpy_dtype())
    t = text.strip()
    try:
        if dtype.kind == 'b':
            low = t.lower()
            if low not in ('true', 'false', '1', '0'):
                raise ValueError(t)
            return np.bool_(low in ('true', '1'))
        if dtype.kind in 'iu':
            v = int(t)
            if not np.iinfo(dtype).min <= v <= np.iinfo(dtype).max:
                raise OverflowError(t)
            return dtype.type(v)
        v = complex(t) if dtype.kind == 'c' else float(t)
        with np.errstate(over='ignore'):
            out = dtype.type(v)
        if np.isfinite(v) != np.isfinite(out) or (not np.isfinite(v) and 'inf' not in t.lower()
                                                  and 'nan' not in t.lower()):
            raise OverflowError(t)  # 1e400 (or 1e39 for a float32) would be infinity
        return out
    except OverflowError:
        raise ScriptingError(f'{name}={text}: out of the range of {dtype.name} ({name} takes {_a(describe(desc))})'
                             ) from None
    except ValueError:
        raise ScriptingError(f'{name}={text}: not {_a(dtype.name)} number ({name} takes {_a(describe(desc))})'
                             ) from None


def _a(noun: str) -> str:
    """``noun`` with its indefinite article: an int32 number, a float64 number."""
    return ('an ' if noun[:1].lower() in 'aeio' else 'a ') + noun


def summary(value) -> str:
    """One line about a result: kind, shape, dtype (and number of stored entries)."""
    import scipy.sparse as sp
    from sdfgsparse.runtime.container import SparseMatrix
    if sp.issparse(value):
        return (f'{value.format.upper()} sparse matrix {value.shape[0]} x {value.shape[1]}, nnz {value.nnz}, '
                f'{value.dtype}')
    if isinstance(value, SparseMatrix):
        return (f'{value.format.name} sparse matrix {value.shape[0]} x {value.shape[1]}, nnz {value.nnz}, '
                f'{value.arrays["vals"].dtype}')
    a = np.asarray(value)
    return f'{a.dtype} array of shape {a.shape}'


def _is_sparse(value) -> bool:
    import scipy.sparse as sp
    from sdfgsparse.runtime.container import SparseMatrix
    return sp.issparse(value) or isinstance(value, SparseMatrix)


def result_paths(out: str, names: Sequence[str], sparse: Sequence[bool]) -> List[str]:
    """Where ``-o OUT`` writes each result (``names``: ``result_0`` ... or written arguments;
    ``sparse``: whether each is sparse). One result: ``OUT`` itself, a ``.npy`` or ``.mtx``
    file (a sparse one ``.mtx`` only) in a folder that exists. Several: ``OUT`` is a folder
    (made by :func:`write_result` if missing, in a folder that exists), holding
    ``<name>.npy`` for each dense result and ``<name>.mtx`` for each sparse one. No path
    may be a symbolic link."""
    if len(names) == 1:
        if not out.endswith(RESULT_SUFFIXES):
            raise ScriptingError(f'-o {out}: give a .npy or .mtx file for the result')
        if sparse[0] and out.endswith('.npy'):
            raise ScriptingError(f'-o {out}: the result is a sparse matrix; write it as .mtx')
        check_output(out)
        return [out]
    if out.endswith(RESULT_SUFFIXES) or os.path.isfile(out):
        folder = os.path.splitext(out)[0] if out.endswith(RESULT_SUFFIXES) else ''
        raise ScriptingError(f'-o {out}: the program has {len(names)} results ({", ".join(names)}); -o takes a folder '
                             'for them', hint=f'-o {folder if folder and not os.path.exists(folder) else "results"}/')
    if os.path.islink(out.rstrip(os.sep) or out):
        raise ScriptingError(f'-o {out}: is a symbolic link; give the path of a folder, not of a link')
    _check_folder(out if os.path.isdir(out) else os.path.dirname(os.path.abspath(out)), f'-o {out}')
    paths = [os.path.join(out, n + ('.mtx' if s else '.npy')) for n, s in zip(names, sparse)]
    for path in paths:
        if os.path.islink(path) or os.path.isdir(path):
            raise ScriptingError(f'-o {out}: {path} is a {"symbolic link" if os.path.islink(path) else "folder"}; '
                                 'the results would not be written as files there')
    return paths


def write_result(value, path: str) -> None:
    """Write one result: ``.npy`` (dense) or ``.mtx`` (dense or sparse). Its folder is made
    when missing (one level: the folder of several results), never a symbolic link followed."""
    if _is_sparse(value) and path.endswith('.npy'):
        raise ScriptingError(f'-o {path}: the result is a sparse matrix; write it as .mtx')
    try:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            os.mkdir(folder)  # one level only: its parent must exist (a missing one is an error)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, 'O_NOFOLLOW', 0), 0o666)
        with os.fdopen(fd, 'wb') as f:
            _write(value, f, path)
    except OSError as exc:  # a path the checks of result_paths could not foresee (a full disk, /proc, a race)
        import errno
        why = 'is a symbolic link' if exc.errno == errno.ELOOP else \
            f'cannot write ({exc.strerror or _first_line(exc)})'
        raise ScriptingError(f'-o {path}: {why}') from None


def _write(value, f, path: str) -> None:
    import scipy.io
    if _is_sparse(value):
        from sdfgsparse.runtime.container import SparseMatrix
        scipy.io.mmwrite(f, value.to_scipy() if isinstance(value, SparseMatrix) else value)
        return
    a = np.asarray(value)
    if path.endswith('.npy'):
        np.save(f, a)
        return
    scipy.io.mmwrite(f, a.reshape(-1, 1) if a.ndim <= 1 else a)  # a vector: one column
