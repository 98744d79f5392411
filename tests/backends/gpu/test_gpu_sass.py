"""The Atoms' machine code holds the instructions each generation is meant to use.

NVRTC compiles for a target it does not run, so all three sets (sm_80, sm_90, sm_100) are
built and disassembled wherever cupy, its NVRTC library and cuobjdump are present; the
test skips, saying which is missing, elsewhere.
"""
import pytest

from purlin.errors import BackendUnavailable

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("cc", [80, 90, 100])
def test_machine_code_holds_the_intended_instructions(cc):
    from purlin.backends.gpu import atomset
    atoms = atomset.ATOM_SETS[cc]
    try:
        code = atomset.sass(atomset.compile_cubin(atoms))
    except BackendUnavailable as e:
        pytest.skip(str(e))
    assert atomset.check_sass(atoms, code) == []
    # the interpreter's copy loop moves whole vectors: 16 bytes, or 32 on sm_100
    vec = "256" if atoms.vec_nbytes == 32 else "128"
    assert f"LDG.E.{'ENL2.' if vec == '256' else ''}{vec}" in code["snac_run"]
