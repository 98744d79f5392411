"""The benchmark and calibration kernels (``benchmarks/cuda/bench_kernels.cu``: standalone
copy and reduce Atoms, their cache-hint, cp.async, TMA and occupancy variants, the
signal-chain and empty kernels), compiled over the production Atoms for one device.

They are never part of the executor's cubin: this module appends them to the source the
executor compiles (``atomset.source(extra)``). ``$PURLIN_DEFINES`` (space-separated
``NAME=VALUE``) compiles a variant of the kernel constants, for experiments only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SOURCE = Path(__file__).with_name("cuda") / "bench_kernels.cu"
NAMES = ("atom_copy", "atom_copy_l2", "atom_copy_cs", "atom_copy_na", "atom_copy_wide", "atom_copy_flat4",
         "atom_copy_occ2", "atom_copy_occ2_u4", "atom_reduce", "atom_copy_async", "empty_kernel",
         "flag_chain", "bump")
#: instruction patterns each benchmark kernel's machine code must hold, per generation
SASS = {80: {"atom_copy": ("LDG.E.128", "STG.E.128"), "atom_copy_na": ("LDG.E.NA.128", "STG.E.NA.128"),
             "atom_copy_async": ("LDGSTS.E.BYPASS.128",), "atom_reduce": ("LDG.E.128", "STG.E.128")},
        90: {"atom_copy": ("LDG.E.128", "STG.E.128"), "atom_copy_l2": ("LDG.E.LTC256B.128",),
             "atom_copy_cs": ("LDG.E.EF.LTC256B.128", "STG.E.EF.128"),
             "atom_copy_na": ("LDG.E.NA.128", "STG.E.NA.128"), "atom_copy_async": ("LDGSTS.E.BYPASS.128",),
             "atom_copy_tma": ("UBLKCP.S.G", "UBLKCP.G.S", "SYNCS"), "atom_reduce": ("LDG.E.128", "STG.E.128")},
        100: {"atom_copy": ("LDG.E.ENL2.256", "STG.E.ENL2.256"), "atom_reduce": ("LDG.E.ENL2.256", "STG.E.ENL2.256"),
              "atom_copy_tma": ("UBLKCP.S.G", "UBLKCP.G.S")}}


@dataclass
class BenchKernels:
    """The benchmark kernels of one device."""

    device: int
    atoms: object
    functions: dict
    sm_count: int
    name: str

    def fn(self, name: str):
        from purlin.errors import BackendUnavailable
        try:
            return self.functions[name]
        except KeyError:
            raise BackendUnavailable(f"{self.atoms.name} has no benchmark kernel {name!r}") from None


def defines() -> tuple[str, ...]:
    return tuple(os.environ.get("PURLIN_DEFINES", "").split())


def cubin(atoms) -> bytes:
    from purlin.backends.gpu import atomset
    return atomset.compile_cubin(atoms, extra_source=SOURCE.read_text(), defines=defines())


@lru_cache(maxsize=None)
def for_device(device: int = 0) -> BenchKernels:
    """Compile (or load from the disk cache) and load the benchmark kernels of ``device``."""
    from purlin.backends.gpu import kernels
    cp = kernels.cupy()
    prod = kernels.for_device(device)
    with cp.cuda.Device(device):
        mod = cp.cuda.function.Module()
        mod.load(cubin(prod.atoms))
        names = NAMES + (("atom_copy_tma",) if prod.atoms.tma else ())
        fns = {n: mod.get_function(n) for n in names}
    return BenchKernels(device, prod.atoms, fns, prod.sm_count, prod.name)


def check_sass(atoms) -> list[str]:
    """Missing instructions in the benchmark kernels' machine code (empty when as meant)."""
    from purlin.backends.gpu import atomset
    code = atomset.sass(cubin(atoms))
    problems = []
    for kernel, patterns in SASS.get(atoms.arch, {}).items():
        body = code.get(kernel)
        if body is None:
            problems.append(f"{atoms.name}: benchmark kernel {kernel} is not in the cubin")
            continue
        problems += [f"{atoms.name}: {kernel} lacks {p}" for p in patterns if p not in body]
    return problems


def interpreter_variant() -> str:
    """With ``$PURLIN_DEFINES`` set, make this process's executor compile its interpreter
    with those constants (an experiment: the package itself never reads the variable).
    Returns the defines ('' when none)."""
    extra = defines()
    if extra:
        from purlin.backends.gpu import atomset, kernels
        plain = atomset.compile_cubin

        def variant(atoms, **kw):
            return plain(atoms, **{**kw, "defines": tuple(kw.get("defines", ())) + extra})
        atomset.compile_cubin = variant
        kernels.for_device.cache_clear()
    return " ".join(extra)
