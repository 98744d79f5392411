"""Loading the Atom set of a device and launching its kernels (cupy, lazily imported)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from purlin.backends.gpu import atomset
from purlin.errors import BackendUnavailable
from purlin.snac.kernel_constants import TMA_SMEM   # dynamic shared memory of snac_run_tma


def cupy():
    """Import cupy, or raise BackendUnavailable saying why."""
    os.environ.setdefault("CUPY_CACHE_DIR", str(atomset.cache_dir().parent / "cupy"))
    try:
        import cupy as cp
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # ImportError, CUDARuntimeError (no driver / no GPU)
        raise BackendUnavailable(f"the GPU executor needs cupy and an NVIDIA GPU: {e}") from e
    if n < 1:
        raise BackendUnavailable("the GPU executor needs an NVIDIA GPU; cupy sees none")
    return cp


def is_available() -> tuple[bool, str]:
    """(True, device name) when cupy and a GPU are here, else (False, why)."""
    try:
        cp = cupy()
        props = cp.cuda.runtime.getDeviceProperties(0)
        return True, props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    except BackendUnavailable as e:
        return False, str(e)


@dataclass
class DeviceKernels:
    """The compiled module of one device and what the launcher needs to know about it."""

    device: int
    atoms: atomset.AtomSet
    module: object
    functions: dict
    sm_count: int
    blocks_per_sm: dict          # kernel name -> co-resident CTAs per SM
    name: str

    def fn(self, name: str):
        """The compiled kernel ``name``; BackendUnavailable if this Atom set has none."""
        try:
            return self.functions[name]
        except KeyError:
            raise BackendUnavailable(f"{self.atoms.name} has no kernel {name!r}") from None

    def interpreter(self, uses_packets: bool, uses_tma: bool, unaligned: bool = False) -> str:
        """Which SNAC kernel runs a schedule: with packet paths only when it needs them, and
        the unaligned kernel (narrow paths) when a Ref or buffer is off 16 bytes."""
        if unaligned:
            return "snac_run_any"
        if uses_packets:
            return "snac_run_pkt"
        return "snac_run_tma" if uses_tma and self.atoms.tma else "snac_run"

    def max_ctas(self, kernel: str = "snac_run") -> int:
        """CTAs of ``kernel`` that fit on the device at once (all must be co-resident)."""
        return self.sm_count * self.blocks_per_sm[kernel]

    def smem(self, kernel: str) -> int:
        """Dynamic shared memory a launch of ``kernel`` takes."""
        return TMA_SMEM if kernel == "snac_run_tma" else 0


@lru_cache(maxsize=None)
def for_device(device: int) -> DeviceKernels:
    """Compile (or load from the disk cache) and load the Atom set of ``device``."""
    cp = cupy()
    with cp.cuda.Device(device):
        props = cp.cuda.runtime.getDeviceProperties(device)
        cc = props["major"] * 10 + props["minor"]
        atoms = atomset.for_capability(cc)
        cubin = atomset.compile_cubin(atoms)
        mod = cp.cuda.function.Module()
        mod.load(cubin)
        names = [k for k in atomset.KERNELS if atoms.tma or k != "snac_run_tma"]
        fns = {n: mod.get_function(n) for n in names}
        if "snac_run_tma" in fns:   # its stage buffers and the refs' static arrays pass the
            # 48 KiB a kernel gets without asking: ask, or no CTA of it fits an SM
            cp.cuda.driver.funcSetAttribute(fns["snac_run_tma"].ptr, _MAX_DYNAMIC_SMEM, TMA_SMEM)
        occ = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor
        per_sm = {n: occ(fns[n].ptr, atomset.THREADS, TMA_SMEM if n == "snac_run_tma" else 0) for n in names}
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return DeviceKernels(device, atoms, mod, fns, props["multiProcessorCount"], per_sm, name)


_MAX_DYNAMIC_SMEM = 8
"""CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (cuda.h)."""


def i64(x) -> np.int64:
    """``x`` as a kernel's 64-bit signed argument."""
    return np.int64(x)


def u64(x) -> np.uint64:
    """``x`` as a kernel's 64-bit unsigned argument."""
    return np.uint64(x)


def machine() -> dict:
    """GPU name, driver and CUDA versions, for results files."""
    cp = cupy()
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    drv = cp.cuda.runtime.driverGetVersion()
    rt = cp.cuda.runtime.runtimeGetVersion()
    info = {"gpu": name, "sm_count": props["multiProcessorCount"],
            "compute_capability": f"{props['major']}.{props['minor']}",
            "cuda_driver_api": f"{drv // 1000}.{drv % 1000 // 10}",
            "cuda_runtime": f"{rt // 1000}.{rt % 1000 // 10}", "cupy": cp.__version__}
    try:   # the compiler of the kernels (the disk cache of cubins is keyed by its version)
        from cupy_backends.cuda.libs import nvrtc
        info["nvrtc"] = ".".join(map(str, nvrtc.getVersion()))
    except Exception:
        pass
    try:
        import subprocess
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            drv_s, sm, mem = [x.strip() for x in out.stdout.splitlines()[0].split(",")]
            info.update(driver=drv_s, max_sm_clock=sm, max_mem_clock=mem)
    except Exception:
        pass
    return info
