"""Collective specs: layouts that name blocks, and the op that joins them."""
from purlin.spec.collective import Collective, validate
from purlin.spec.dtypes import DType, dtype
from purlin.spec.layout import Block, Layout, packed, scattered, transposed
from purlin.spec.semantics import evaluate
from purlin.spec import library

__all__ = ["Block", "Collective", "DType", "Layout", "dtype", "evaluate", "library",
           "packed", "scattered", "transposed", "validate"]
