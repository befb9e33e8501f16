"""Device audit: on the CPU, find what would stall or break a GPU run.

Inside `DeviceAudit(device)` every tensor is tagged host or device by how it was made, as if
`device` were separate memory even when it is the CPU:
- device: factories given `device=` that device (a torch.device, or a string other than "cpu":
  the literal string "cpu" always names the host), `.to(device)` / `.cuda()`, `*_like` and `new_*`
  of a device tensor, and the outputs of any operation with a device input;
- host: factories without a device, `torch.from_numpy`, `.cpu()`, and tensors the audit never
  saw being made.
The audit counts, per source line outside torch (file:line), four kinds of event:
- `cross_device`: an operation mixing a device tensor with a host tensor of more than one value
  (a GPU refuses it or copies implicitly);
- `numpy_of_device`: `.numpy()` or `np.asarray` of a device tensor (a GPU refuses it);
- `sync`: the host waits for the device: `.item()`, `bool()`, `float()`, `int()`, `.tolist()`,
  `.cpu()` of a device tensor, and data-dependent shapes (`nonzero`, boolean-mask indexing,
  `masked_select`, `unique`, `bincount`, one-argument `where`, `repeat_interleave` by a tensor
  without `output_size`, `equal`, `allclose`) and the linear algebra that checks its result;
- `copy_to_device`: host data moved onto the device (`.to(device)`, `as_tensor(..., device=)`,
  `copy_` from host, indexing a device tensor with host indices or numpy arrays).
It uses torch's public overrides API (TorchFunctionMode); the deep copy of a parameter, which
that API does not see, is wrapped for the duration of the audit so the copy keeps its place.
"""

import collections
import os
import sys

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

KINDS = ("cross_device", "numpy_of_device", "sync", "copy_to_device")
HOST, DEVICE = "host", "device"

_FACTORIES = {
    "zeros",
    "ones",
    "empty",
    "full",
    "arange",
    "range",
    "linspace",
    "logspace",
    "eye",
    "rand",
    "randn",
    "randint",
    "randperm",
    "empty_strided",
    "scalar_tensor",
    "tensor",
    "as_tensor",
    "asarray",
}
_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"}
_NEW = {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "new_empty_strided"}
_SYNC_METHODS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "__complex__"}
_DATA_DEPENDENT = {
    "nonzero",
    "argwhere",
    "masked_select",
    "unique",
    "unique_consecutive",
    "bincount",
    "equal",
    "allclose",
    "linalg_eigh",
    "eigh",
    "eigvalsh",
    "cholesky",
    "inv",
    "solve",
    "lstsq",
}
_METADATA = {
    "_has_compatible_shallow_copy_type",
    "is_floating_point",
    "is_complex",
    "dim",
    "size",
    "numel",
    "stride",
    "is_contiguous",
    "data_ptr",
    "element_size",
    "__len__",
    "get_device",
}
_TORCH_DIR = os.path.dirname(torch.__file__)
_SKIP_FILES = (_TORCH_DIR, os.path.abspath(__file__), os.path.dirname(collections.__file__) + os.sep + "contextlib")


def _tensors(obj, depth=0):
    """Tensors in obj, looking into lists, tuples and dicts two levels deep."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 2 and isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item, depth + 1)
    elif depth < 2 and isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item, depth + 1)


def _name(func):
    return getattr(func, "__name__", "") or ""


def _location():
    """file:line of the innermost caller outside torch and this module."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP_FILES):
        frame = frame.f_back
    if frame is None:
        return "?"
    path = frame.f_code.co_filename
    here = os.getcwd() + os.sep
    path = path[len(here) :] if path.startswith(here) else path
    return f"{path}:{frame.f_lineno}"


class DeviceAudit(TorchFunctionMode):
    """A context manager that tags tensors host or device and counts events per source line.

    `counts[kind][location]` holds the counts; `total(kind)` sums a kind; `report()` is a JSON-ready
    summary. `mark_device(t)` tags a tensor made outside the audit as a device tensor."""

    def __init__(self, device="cpu"):
        super().__init__()
        self.device = torch.device(device)
        self.place = WeakIdKeyDictionary()
        self.counts = {kind: collections.Counter() for kind in KINDS}

    def __enter__(self):
        original = torch.nn.Parameter.__deepcopy__
        place = self.place

        def deepcopy(parameter, memo):
            copied = original(parameter, memo)
            place[copied] = place.get(parameter, HOST)
            return copied

        self._restore = original
        torch.nn.Parameter.__deepcopy__ = deepcopy
        return super().__enter__()

    def __exit__(self, *exc):
        torch.nn.Parameter.__deepcopy__ = self._restore
        return super().__exit__(*exc)

    def mark_device(self, tensor):
        self.place[tensor] = DEVICE
        return tensor

    def total(self, kind, where=None):
        """Events of `kind`, at locations containing `where` when given."""
        return sum(n for loc, n in self.counts[kind].items() if where is None or where in loc)

    def report(self):
        return {kind: dict(sorted(self.counts[kind].items())) for kind in KINDS}

    def _record(self, kind, what=""):
        self.counts[kind][_location() + (f" {what}" if what else "")] += 1

    def _is_target(self, device):
        if device is None:
            return None
        if isinstance(device, torch.Tensor):
            return self.place.get(device, HOST) == DEVICE
        if isinstance(device, str) and device.startswith("cpu"):
            return False  # the literal "cpu" names the host (torch.optim keeps its step counts there)
        try:
            d = torch.device(device)
        except (TypeError, RuntimeError):
            return None
        if d.type != self.device.type:
            return False
        return d.index is None or self.device.index is None or d.index == self.device.index

    def _where(self, t):
        return self.place.get(t, HOST)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _name(func)
        owner = getattr(func, "__self__", None)
        if name in ("__get__", "__set__") and owner is not None and not isinstance(owner, torch.Tensor):
            return self._attribute(func, getattr(owner, "__name__", ""), args, kwargs)
        inputs = list(_tensors(args)) + list(_tensors(kwargs))
        on_device = [t for t in inputs if self._where(t) == DEVICE]
        self._check(name, args, kwargs, inputs, on_device)
        result = func(*args, **kwargs)
        place = self._result_place(name, args, kwargs, inputs, on_device)
        if (
            inputs
            and result is inputs[0]
            and name in ("cpu", "to", "cuda", "as_tensor", "asarray")
            and place != self._where(result)
        ):
            result = result.clone()  # separate memory, as a real move between host and device gives
        for out in _tensors(result):
            self.place[out] = place
        return result

    def _attribute(self, func, attribute, args, kwargs):
        result = func(*args, **kwargs)
        if (
            func.__name__ == "__get__"
            and attribute in ("grad", "data", "T", "mT", "H", "real", "imag")
            and isinstance(result, torch.Tensor)
        ):
            self.place[result] = self._where(args[0])
        elif func.__name__ == "__set__" and attribute == "data" and isinstance(args[1], torch.Tensor):
            self.place[args[0]] = self._where(args[1])
        return result

    def _check(self, name, args, kwargs, inputs, on_device):
        first = args[0] if args else None
        first_on_device = isinstance(first, torch.Tensor) and self._where(first) == DEVICE
        if name in ("numpy", "__array__"):
            if first_on_device:
                self._record("numpy_of_device")
            return
        if name in _SYNC_METHODS or name == "cpu":
            if first_on_device:
                self._record("sync")
            return
        if not on_device or name in _METADATA:
            return
        if name in ("to", "cuda", "copy_"):
            if name == "copy_" and first_on_device and len(args) > 1 and self._where(args[1]) == HOST:
                self._record("copy_to_device")
            return
        if (
            name in _DATA_DEPENDENT
            or (name == "where" and len(args) + len(kwargs) == 1)
            or (
                name == "repeat_interleave"
                and isinstance(args[1] if len(args) > 1 else kwargs.get("repeats"), torch.Tensor)
                and kwargs.get("output_size") is None
            )
        ):
            self._record("sync")
        if name in ("__getitem__", "__setitem__", "index_put_", "index_put") and first_on_device:
            self._indexing(name, args)
            return
        host = [t for t in inputs if self._where(t) == HOST and t.numel() > 1]
        if host:
            self._record("cross_device", name)

    def _indexing(self, name, args):
        index = args[1]
        parts = index if isinstance(index, tuple) else (index,)
        for part in parts:
            if isinstance(part, (np.ndarray, list)):
                self._record("copy_to_device")
            elif isinstance(part, torch.Tensor):
                if self._where(part) == HOST and part.numel() > 0:
                    self._record("copy_to_device")
                if part.dtype == torch.bool:
                    value = args[2] if name == "__setitem__" else None
                    scalar_fill = name == "__setitem__" and (not isinstance(value, torch.Tensor) or value.numel() == 1)
                    if not scalar_fill:
                        self._record("sync")
        if (
            name == "__setitem__"
            and isinstance(args[2], torch.Tensor)
            and self._where(args[2]) == HOST
            and args[2].numel() > 1
        ):
            self._record("copy_to_device")

    def _result_place(self, name, args, kwargs, inputs, on_device):
        if name == "cpu":
            return HOST
        if name == "cuda":
            return self._moved(args[0])
        if name == "to":
            target = kwargs.get("device")
            for a in args[1:]:
                if isinstance(a, (str, torch.device, torch.Tensor)):
                    target = a
            moved = self._is_target(target)
            if moved is None:
                return self._where(args[0])
            return self._moved(args[0]) if moved else HOST
        explicit = self._is_target(kwargs.get("device"))
        if name in _FACTORIES:
            if explicit:
                data = args[0] if args else kwargs.get("data")
                if name in ("tensor", "as_tensor", "asarray") and not (
                    isinstance(data, torch.Tensor) and self._where(data) == DEVICE
                ):
                    self._record("copy_to_device")
                return DEVICE
            if explicit is None and name in ("as_tensor", "asarray") and isinstance(args[0], torch.Tensor):
                return self._where(args[0])
            return HOST
        if name in _LIKE or name in _NEW:
            if explicit is not None:
                return DEVICE if explicit else HOST
            return self._where(args[0])
        return DEVICE if on_device else HOST

    def _moved(self, tensor):
        if self._where(tensor) == HOST:
            self._record("copy_to_device")
        return DEVICE
