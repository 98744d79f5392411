"""Atom sets: one per GPU generation, compiled with NVRTC and cached on disk.

An :class:`AtomSet` names the target (``sm_80``, ``sm_90``, ``sm_100``), its vector width
and which copy kinds it has, and what its machine code must hold (checked by
``tests/backends/gpu/test_gpu_sass.py``). Compiling needs only the NVRTC library (no
GPU), so every set can be built and disassembled on any machine with cupy and NVRTC:

>>> from purlin.backends.gpu.atomset import ATOM_SETS, for_capability
>>> for_capability(90).name, for_capability(90).vec_nbytes
('sm_90', 16)
>>> for_capability(100).vec_nbytes
32
"""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from purlin.errors import BackendUnavailable

THREADS = 512            # threads per CTA of every Purlin kernel
MIN_BLOCKS = 1           # CTAs per SM the launch bounds leave room for (128 registers)
CUDA_DIR = Path(__file__).with_name("cuda")
SOURCES = ("atoms.cuh", "snac.cu")


@dataclass(frozen=True)
class AtomSet:
    """The Atoms of one GPU generation.

    ``copy_kinds`` are the standalone copy kernels it has: ``sm`` (vector loads/stores),
    ``async`` (cp.async global->shared->global, LDGSTS), ``tma`` (bulk-copy engine), plus
    ``ce`` (copy engine, cudaMemcpyAsync; no kernel). ``sass_expect`` maps a kernel name to
    instruction patterns its machine code must contain.
    """

    name: str
    arch: int
    vec_nbytes: int
    tma: bool
    copy_kinds: tuple[str, ...]
    sass_expect: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def defines(self) -> tuple[str, ...]:
        """Compile-time constants; ``$PURLIN_DEFINES`` (space-separated ``NAME=VALUE``)
        adds experiment knobs, cached apart by the options hash."""
        extra = tuple(f"-D{d}" for d in os.environ.get("PURLIN_DEFINES", "").split())
        return (f"-DPURLIN_VEC={self.vec_nbytes}", f"-DPURLIN_THREADS={THREADS}",
                f"-DPURLIN_TMA={int(self.tma)}", f"-DPURLIN_MIN_BLOCKS={MIN_BLOCKS}") + extra


ATOM_SETS = {
    80: AtomSet("sm_80", 80, 16, False, ("sm", "async", "ce"), {
        "atom_copy": ("LDG.E.128", "STG.E.128"),
        "atom_copy_na": ("LDG.E.NA.128", "STG.E.NA.128"),
        "atom_copy_async": ("LDGSTS.E.BYPASS.128",),
        "atom_reduce": ("LDG.E.128", "STG.E.128"),
        "snac_run": ("LDG.E.128", "STG.E.128", "MEMBAR.SC.SYS", "STG.E.64.STRONG.SYS",
                     "LDG.E.64.STRONG.SYS"),
        "snac_run_pkt": ("LDG.E.128.STRONG.SYS", "STG.E.128.STRONG.SYS"),
    }),
    90: AtomSet("sm_90", 90, 16, True, ("sm", "async", "tma", "ce"), {
        "atom_copy": ("LDG.E.128", "STG.E.128"),
        "atom_copy_l2": ("LDG.E.LTC256B.128",),
        "atom_copy_cs": ("LDG.E.EF.LTC256B.128", "STG.E.EF.128"),
        "atom_copy_na": ("LDG.E.NA.128", "STG.E.NA.128"),
        "atom_copy_async": ("LDGSTS.E.BYPASS.128",),
        "atom_copy_tma": ("UBLKCP.S.G", "UBLKCP.G.S", "SYNCS"),
        "atom_reduce": ("LDG.E.128", "STG.E.128"),
        "snac_run": ("LDG.E.128", "STG.E.128", "MEMBAR.SC.SYS", "STG.E.64.STRONG.SYS",
                     "LDG.E.64.STRONG.SYS", "STG.E.64.STRONG.GPU", "LDG.E.64.STRONG.GPU"),
        "snac_run_pkt": ("LDG.E.128.STRONG.SYS", "STG.E.128.STRONG.SYS"),
        "snac_run_tma": ("UBLKCP.S.G", "UBLKCP.G.S"),
    }),
    100: AtomSet("sm_100", 100, 32, True, ("sm", "tma", "ce"), {
        "atom_copy": ("LDG.E.ENL2.256", "STG.E.ENL2.256"),
        "atom_reduce": ("LDG.E.ENL2.256", "STG.E.ENL2.256"),
        "atom_copy_tma": ("UBLKCP.S.G", "UBLKCP.G.S"),
        "snac_run": ("LDG.E.ENL2.256", "STG.E.ENL2.256", "MEMBAR.SC.SYS", "STG.E.64.STRONG.SYS"),
    }),
}


def for_capability(cc: int) -> AtomSet:
    """The Atom set for compute capability ``cc`` (major*10 + minor): the newest
    generation not newer than the GPU."""
    for arch in sorted(ATOM_SETS, reverse=True):
        if cc >= arch:
            return ATOM_SETS[arch]
    raise BackendUnavailable(f"GPU of compute capability {cc // 10}.{cc % 10}: Purlin's Atoms "
                             f"need sm_80 or newer (A100, H100/H200, B200)")


def source() -> str:
    """The CUDA source of every Purlin kernel, includes resolved (NVRTC gets no paths)."""
    text = (CUDA_DIR / "snac.cu").read_text()
    return text.replace('#include "atoms.cuh"', (CUDA_DIR / "atoms.cuh").read_text())


def cache_dir() -> Path:
    """Where cubins are kept: ``$PURLIN_CACHE_DIR`` or ``~/.cache/purlin/kernels``."""
    root = os.environ.get("PURLIN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "purlin")
    path = Path(root) / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
    except Exception as e:  # ImportError, or the NVRTC library is missing
        raise BackendUnavailable(f"NVRTC through cupy is unavailable here: {e}") from e
    return nvrtc


def options(atoms: AtomSet) -> tuple[str, ...]:
    """NVRTC options for ``atoms``: C++17, its architecture, and its defines."""
    return ("-std=c++17", f"-arch=sm_{atoms.arch}", "-default-device",
            *atoms.defines)


def compile_cubin(atoms: AtomSet, *, use_cache: bool = True) -> bytes:
    """Compile every Purlin kernel for ``atoms``' target with NVRTC; cached on disk by a hash
    of source, options and NVRTC version. Needs no GPU."""
    nvrtc = _nvrtc()
    src = source()
    opts = options(atoms)
    key = hashlib.sha256(repr((src, opts, nvrtc.getVersion())).encode()).hexdigest()[:24]
    path = cache_dir() / f"purlin-{atoms.name}-{key}.cubin"
    if use_cache and path.exists():
        return path.read_bytes()
    prog = nvrtc.createProgram(src, "purlin_snac.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except Exception as e:
            log = nvrtc.getProgramLog(prog)
            raise BackendUnavailable(f"NVRTC failed to compile the {atoms.name} Atoms:\n{log}") from e
        cubin = _whole_elf(nvrtc.getCUBIN(prog))
    finally:
        nvrtc.destroyProgram(prog)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(cubin)
    os.replace(tmp, path)
    return cubin


def _whole_elf(blob: bytes) -> bytes:
    """cupy's getCUBIN drops the image's last byte; the loader does not mind, but
    cuobjdump does. Pad back to the size the ELF headers give."""
    if blob[:4] != b"\x7fELF":
        return blob
    phoff, shoff = struct.unpack_from("<QQ", blob, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", blob, 0x36)
    end = max(shoff + shentsize * shnum, phoff + phentsize * phnum)
    return blob + b"\0" * max(0, end - len(blob))


def find_cuobjdump() -> str | None:
    """Path of cuobjdump ($CUOBJDUMP, PATH, or $CUDA_PATH/bin), or None if there is none."""
    for cand in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
                 os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "bin", "cuobjdump")):
        if cand and os.path.exists(cand):
            return cand
    return None


def sass(cubin: bytes) -> dict[str, str]:
    """Machine code per kernel (cuobjdump --dump-sass), keyed by function name."""
    tool = find_cuobjdump()
    if tool is None:
        raise BackendUnavailable("cuobjdump is not on PATH (set CUOBJDUMP or CUDA_PATH)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "--dump-sass", f.name], check=True, capture_output=True,
                              text=True).stdout
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Function :"):
            current = s.split(":", 1)[1].strip()
            out[current] = []
        elif current is not None:
            out[current].append(s)
    return {k: "\n".join(v) for k, v in out.items()}


def check_sass(atoms: AtomSet, code: dict[str, str]) -> list[str]:
    """Missing instructions, as messages; empty when the machine code is as intended."""
    problems = []
    for kernel, patterns in atoms.sass_expect.items():
        body = code.get(kernel)
        if body is None:
            problems.append(f"{atoms.name}: kernel {kernel} is not in the cubin")
            continue
        for pat in patterns:
            if pat not in body:
                problems.append(f"{atoms.name}: {kernel} lacks {pat}")
    return problems
