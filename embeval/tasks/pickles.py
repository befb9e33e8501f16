"""A restricted unpickler for data files (SentEval's COCO pickles): plain containers, strings,
numbers and numpy arrays of numbers only; anything else is refused before it is built."""

import pickle
import pickletools

import numpy as np

from embeval.errors import DataFileError
from embeval.untrusted import check_data_file


class _Refused(pickle.UnpicklingError):
    """The pickle asks to build something other than plain data."""


_NUMBER_KINDS = "biufc"  # bool, signed and unsigned integers, IEEE floats, complex
_MAX_ARRAY_BYTES = 1 << 34


def _damaged(what):
    return pickle.UnpicklingError(f"damaged numpy {what}")


class _DType:
    """Stands in for numpy.dtype(spec) while unpickling: numpy never sees an unchecked state
    (a damaged dtype or array state can crash numpy's C code)."""

    def __init__(self, spec, align=False, copy=False):
        if not isinstance(spec, str) or len(spec) > 8:
            raise _damaged("dtype")
        try:
            self.dtype = np.dtype(spec)
        except TypeError:
            raise _damaged("dtype")
        if self.dtype.kind not in _NUMBER_KINDS or self.dtype.fields is not None or self.dtype.subdtype:
            raise _Refused(f"refused to build arrays of dtype {spec!r}: only numbers are allowed")

    def __setstate__(self, state):
        # (version, byte order, subarray, names, fields, element size, alignment, flags[, metadata])
        if not (
            isinstance(state, tuple)
            and len(state) in (8, 9)
            and state[0] in (3, 4)
            and state[1] in ("<", ">", "|", "=")
            and state[2:5] == (None, None, None)
        ):
            raise _damaged("dtype")
        if state[1] in "<>":
            self.dtype = self.dtype.newbyteorder(state[1])


def _real_dtype(dtype):
    if isinstance(dtype, _DType):
        return dtype.dtype
    raise _damaged("array dtype")


def _array(raw, dtype, shape, order):
    """A fresh array from checked parts: raw bytes, a dtype, a shape of non-negative ints, C or F order."""
    dtype = _real_dtype(dtype)
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape) or order not in "CF":
        raise _damaged("array shape")
    size = dtype.itemsize * int(np.prod(shape, dtype=object))
    if not isinstance(raw, (bytes, bytearray, pickle.PickleBuffer)) or size > _MAX_ARRAY_BYTES:
        raise _damaged("array data")
    if memoryview(raw).nbytes != size:
        raise _damaged("array data")
    return np.frombuffer(raw, dtype=dtype).reshape(shape, order=order).copy(order="K")


class _Array:
    """Stands in for numpy's _reconstruct(ndarray, (0,), typecode) until its state arrives."""

    def __init__(self, cls, shape, typecode):
        if cls is not _NDARRAY:
            raise _damaged("array")
        self.array = None

    def __setstate__(self, state):
        # (version, shape, dtype, Fortran order, raw data)
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1 and isinstance(state[3], bool)):
            raise _damaged("array")
        self.array = _array(state[4], state[2], state[1], "F" if state[3] else "C")


_NDARRAY = object()


def _scalar(dtype, raw):
    return _array(raw, dtype, (), "C")[()]


def _frombuffer(buf, dtype, shape, order):
    return _array(buf, dtype, shape, order)


def _latin1(text, encoding):
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _damaged("array bytes")
    return text.encode("latin-1")


def _empty_bytes(*args):
    """bytes() as protocol-2 pickles write an empty bytes object (an empty array's data)."""
    if args:
        raise _damaged("array bytes")
    return b""


def _plain(value, seen=None):
    """The unpickled structure with every stand-in replaced by the array it built."""
    seen = set() if seen is None else seen
    if isinstance(value, _Array):
        if value.array is None:
            raise _damaged("array")
        return value.array
    if isinstance(value, _DType):
        return value.dtype
    if isinstance(value, (dict, list)) and id(value) not in seen:
        seen.add(id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in list(items):
            value[key] = _plain(item, seen)
    elif isinstance(value, tuple):
        return tuple(_plain(item, seen) for item in value)
    return value


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only plain containers, strings, numbers and numpy arrays of numbers; refuses any other
    global. numpy's own constructors are replaced by stand-ins that check every part (dtype, shape,
    byte count) before an array is made, so damaged bytes cannot reach numpy's C code.

    numpy arrays carry their bytes through `_codecs.encode` (str -> bytes) in protocol <= 2
    pickles written by Python 3, and through `_frombuffer` in protocol 5 ones.
    """

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): _Array,
        ("numpy._core.multiarray", "_reconstruct"): _Array,
        ("numpy.core.multiarray", "scalar"): _scalar,
        ("numpy._core.multiarray", "scalar"): _scalar,
        ("numpy", "ndarray"): _NDARRAY,
        ("numpy", "dtype"): _DType,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("builtins", "complex"): complex,
        ("numpy.core.numeric", "_frombuffer"): _frombuffer,  # protocol-5 pickles of arrays
        ("numpy._core.numeric", "_frombuffer"): _frombuffer,
        ("_codecs", "encode"): _latin1,  # protocol-2 pickles written by Python 3 carry array bytes through it
        ("builtins", "bytes"): _empty_bytes,
    }

    def find_class(self, module, name):
        module = "builtins" if module == "__builtin__" else module  # Python 2's name
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[module, name]
        raise _Refused(f"refused to build {module}.{name}: only plain data is allowed")


def load_plain_pickle(path, task):
    """Unpickle a data file with the restricted unpickler (Python 2 pickles as latin-1).

    Every opcode and the length of its argument are checked first (pickletools.genops): given a
    damaged length, CPython's unpickler can leak the buffer and print a SystemError on stderr."""
    check_data_file(path, task, DataFileError)
    try:
        with open(path, "rb") as f:
            for _ in pickletools.genops(f):
                pass
            f.seek(0)
            return _plain(_PlainDataUnpickler(f, encoding="latin1").load())
    except _Refused as err:
        raise DataFileError(f"not a plain-data pickle: {err}", file=path, task=task)
    except OSError as err:
        raise DataFileError(f"cannot read: {err.strerror or err}", file=path, task=task)
    except Exception as err:  # damaged bytes make the unpickler fail in any of a dozen ways
        raise DataFileError(f"corrupt pickle ({type(err).__name__}: {str(err)[:200]})", file=path, task=task)
