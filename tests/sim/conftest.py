"""Fixtures for the simulator tests (helpers live in tests/sim/simkit.py)."""
import pytest

from tests.sim.simkit import round_calibration


@pytest.fixture
def cal():
    return round_calibration()
