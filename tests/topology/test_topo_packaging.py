"""The YAMLs ship in the wheel: pyproject lists every package and maps topologies/."""

from pathlib import Path

import pytest

from purlin.topology import data_root, list_topologies

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]


def _setuptools_config():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_topologies_folder_ships_as_package_data():
    config = _setuptools_config()
    assert config["package-dir"]["purlin.data.topologies"] == "topologies"
    assert "purlin.data.topologies" in config["packages"]
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert set(patterns["purlin.data.topologies"]) >= {"*.yaml", "calibration/*.json", "codesign/*.json"}


def test_every_python_package_is_listed():
    """The package list is explicit (find cannot add the mapped data package), so a new
    subpackage must be added to pyproject.toml or it silently misses the wheel."""
    listed = set(_setuptools_config()["packages"])
    found = {
        ".".join(d.relative_to(REPO).parts)
        for d in [REPO / "purlin", *(REPO / "purlin").rglob("*")]
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
    }
    missing = sorted(found - listed)
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_codesign_tables_ship_beside_the_yaml_files():
    """The planner finds a topology's table through data_root() (installed: package
    data), so the tables must be inside the mapped folder, one per shipped topology name."""
    tables = [e.name for e in data_root().joinpath("codesign").iterdir() if e.name.endswith(".json")]
    assert tables and {t[:-len(".json")] for t in tables} <= set(list_topologies())


def test_data_root_holds_the_yaml_files():
    root = data_root()
    assert root.joinpath("hgx-h200-8.yaml").is_file()
    assert len(list_topologies()) >= 13
