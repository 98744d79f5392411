"""What the GPU executor accepts as a buffer: cupy arrays, torch tensors, anything with
``__cuda_array_interface__`` or ``__dlpack__``. Only the device pointer, size and element
type are used; nothing is copied."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from purlin.errors import SpecError

_TORCH = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int32": "int32",
          "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}
_NUMPY = {"float32": "fp32", "float16": "fp16", "int32": "int32", "bfloat16": "bf16",
          "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


@dataclass(frozen=True)
class Buffer:
    """A contiguous device buffer: pointer, bytes, Purlin dtype name (None if unknown),
    device ordinal, and the object that owns it (kept alive by the caller)."""

    ptr: int
    nbytes: int
    dtype: str | None
    device: int
    owner: Any = None
    is_torch: bool = False


def as_buffer(x: Any, what: str = "buffer") -> Buffer:
    """Describe ``x`` (cupy array, torch tensor, CUDA-array-interface or DLPack object)."""
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        if not x.is_cuda:
            raise SpecError(f"{what}: a torch tensor on {x.device}, not on a CUDA device")
        if not x.is_contiguous():
            raise SpecError(f"{what}: torch tensor is not contiguous")
        name = str(x.dtype).replace("torch.", "")
        return Buffer(x.data_ptr(), x.numel() * x.element_size(), _TORCH.get(name), x.device.index,
                      x, True)
    if mod == "cupy":
        if not (x.flags.c_contiguous):
            raise SpecError(f"{what}: cupy array is not C-contiguous")
        return Buffer(x.data.ptr, x.nbytes, _NUMPY.get(x.dtype.name), x.device.id, x)
    if hasattr(x, "__cuda_array_interface__"):
        cai = x.__cuda_array_interface__
        import numpy as np
        dt = np.dtype(cai["typestr"])
        n = 1
        for d in cai["shape"]:
            n *= d
        if cai.get("strides") not in (None, ()):
            raise SpecError(f"{what}: strided CUDA arrays are not supported; pass a contiguous one")
        from purlin.backends.gpu.kernels import cupy
        cp = cupy()
        dev = cp.cuda.runtime.pointerGetAttributes(cai["data"][0]).device
        return Buffer(cai["data"][0], n * dt.itemsize, _NUMPY.get(dt.name), dev, x)
    if hasattr(x, "__dlpack__"):
        from purlin.backends.gpu.kernels import cupy
        return as_buffer(cupy().from_dlpack(x), what)
    raise SpecError(f"{what}: {type(x).__name__} is not a GPU array (cupy, torch, "
                    f"__cuda_array_interface__ or DLPack)")
