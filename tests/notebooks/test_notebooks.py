"""Execute every tutorial notebook under ``notebooks/`` top to bottom.

Each notebook asserts on its own results in its cells, so a notebook passes when no cell
raises. The notebooks are parametrized from the folder, so a new one is picked up without
editing this file. They run as Jupyter would run them (working directory: the notebook's
folder), with ``PURLIN_NOTEBOOK_FIGURES`` pointing at a temporary folder for their figures;
a notebook must not leave files behind in the repository.

Needs nbformat, nbclient and ipykernel (``pip install -e '.[dev]'``); skipped without them.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="notebook tests need nbformat (pip install -e '.[dev]')")
nbclient = pytest.importorskip("nbclient", reason="notebook tests need nbclient (pip install -e '.[dev]')")
pytest.importorskip("ipykernel", reason="notebook tests need ipykernel (pip install -e '.[dev]')")

from nbclient.exceptions import CellExecutionError, CellTimeoutError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL = "python3"
CELL_TIMEOUT_S = 600   # notebook 04 prefills on 576 GPUs: two 576-rank AllToAllVs, ~6 min on 2 cores


def _kernel_available() -> bool:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    try:
        KernelSpecManager().get_kernel_spec(KERNEL)
    except NoSuchKernel:
        return False
    return True


def _plain(text: str) -> str:
    """Drop the ANSI colour codes IPython puts in tracebacks."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts}


def test_notebooks_are_found():
    assert NOTEBOOKS, f"no notebooks under {NOTEBOOK_DIR}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _kernel_available():
        pytest.skip(f"no Jupyter kernel named {KERNEL!r} (pip install ipykernel)")
    nb = nbformat.read(path, as_version=4)
    assert not any(cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), (
        f"{path.name} is stored with outputs; clear them before committing")
    # The kernel inherits this environment: figures go to tmp, plots need no display, and
    # ``import purlin`` finds this checkout (not whichever one is pip-installed).
    monkeypatch.setenv("PURLIN_NOTEBOOK_FIGURES", str(tmp_path / "figures"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    before = _files(NOTEBOOK_DIR)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=KERNEL,
                                     resources={"metadata": {"path": str(path.parent)}})
    failure = None
    try:
        client.execute()
    except CellExecutionError as e:   # its message holds the cell's source and traceback
        failure = f"{path.name}: a cell raised\n{_plain(str(e))}"
    except CellTimeoutError as e:
        failure = f"{path.name}: a cell ran past {CELL_TIMEOUT_S} s\n{_plain(str(e))}"
    if failure:
        pytest.fail(failure, pytrace=False)
    left = sorted(str(p.relative_to(NOTEBOOK_DIR)) for p in _files(NOTEBOOK_DIR) - before)
    assert not left, f"{path.name} wrote into the repository: {left}"
