"""purlin.torch's argument rules, checked without torch (an optional extra CI lacks):
what passes comes back normalised, with the sizes the ops would return."""
from typing import NamedTuple

import pytest

from purlin.errors import SpecError
from purlin.torchargs import OPS, check_max_nbytes, check_op, check_tensors, check_world, out_numel


class T(NamedTuple):
    shape: tuple
    dtype: str = "float32"
    device: str = "cpu"


def test_ops_map_torch_names_to_purlin_ops():
    assert {k: check_op("all_reduce", k) for k in OPS} == {
        "sum": "add", "add": "add", "prod": "mul", "mul": "mul", "max": "max", "min": "min"}


@pytest.mark.parametrize("name,n,w,want", [("all_reduce", 7, 4, 7), ("all_gather", 7, 4, 28),
                                           ("reduce_scatter", 12, 4, 3), ("all_to_all", 12, 4, 12)])
def test_out_numel(name, n, w, want):
    assert out_numel(name, n, w) == want


def test_a_list_or_tuple_of_alike_tensors_passes():
    xs = (T((2, 3)), T((2, 3)), T((2, 3)))
    assert check_tensors("all_reduce", xs) == list(xs)
    check_world("all_reduce", True, 1, True)       # CUDA with a registered world
    check_world("all_reduce", False, 0, False)     # CPU with none
    assert check_max_nbytes(64 << 20) == 64 << 20


def test_dtype_differences_are_named():
    with pytest.raises(SpecError, match=r"xs\[2\] has dtype bfloat16, xs\[0\] float32"):
        check_tensors("all_gather", [T((4,)), T((4,)), T((4,), "bfloat16")])


def test_a_string_is_not_a_tensor_list():
    with pytest.raises(SpecError, match="xs is one str; pass one tensor per rank"):
        check_tensors("all_gather", "xs")
