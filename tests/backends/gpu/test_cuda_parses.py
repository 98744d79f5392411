"""The CUDA sources parse as C++ on a machine without CUDA.

NVRTC only runs where cupy and a CUDA toolkit are; a slip in the kernel source would go
unseen until then. Here the source (atoms.cuh inlined, as NVRTC gets it) is parsed by the
host C++ compiler with stand-ins for the CUDA keywords and built-ins
(``cuda_host_stubs.h``), for both vector widths: syntax, names and every template the
kernels instantiate, with each Atom set's defines. Inline PTX is not assembled, so the
device tests stay the judge of the machine code.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

from purlin.backends.gpu import atomset

HERE = Path(__file__).parent


@pytest.mark.parametrize("cc", sorted(atomset.ATOM_SETS))
def test_kernel_source_parses_with_a_host_compiler(cc, tmp_path):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler (g++ or clang++) on PATH")
    src = tmp_path / "purlin_snac.cpp"
    src.write_text(f'#include "{HERE / "cuda_host_stubs.h"}"\n' + atomset.source())
    done = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-w", *atomset.ATOM_SETS[cc].defines, str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
