"""Find and open topology files: the shipped ones by name, or any YAML by path.

Shipped files live in the repository's ``topologies/`` folder, which the wheel
installs as the package data ``purlin.data.topologies``. The loader asks
importlib.resources first (an installed wheel) and falls back to the repository
folder (a source checkout or an editable install), so both find the same files.
"""

from __future__ import annotations

import importlib.resources
import numbers
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from purlin.errors import TopologyError
from purlin.topology.model import Topology
from purlin.topology.parse import parse_topology

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

DATA_PACKAGE = "purlin.data.topologies"
MAX_FILE_NBYTES = 16 << 20
"""A topology file is a page of YAML; anything past 16 MiB is not one."""
_REPO_DATA = Path(__file__).resolve().parents[2] / "topologies"


def data_root() -> Traversable:
    """The folder of shipped topology files (and their ``calibration/`` subfolder).

    Installed: the package data ``purlin.data.topologies``; in a source checkout:
    ``<repo>/topologies``. Both support ``joinpath``, ``iterdir`` and ``read_text``.

    Examples
    --------
    >>> data_root().joinpath("hgx-h200-8.yaml").is_file()
    True
    """
    try:
        root = importlib.resources.files(DATA_PACKAGE)
        if any(entry.name.endswith(".yaml") for entry in root.iterdir()):
            return root
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    return _REPO_DATA


def list_topologies() -> list[str]:
    """Names of the shipped topologies, sorted (what ``load_topology`` accepts).

    Examples
    --------
    >>> "hgx-h200-8" in list_topologies()
    True
    """
    root = data_root()
    if not root.is_dir():
        return []
    return sorted(e.name[: -len(".yaml")] for e in root.iterdir() if e.name.endswith(".yaml") and e.is_file())


def load_topology(name_or_path: str | Path, world: int | None = None, gpus: int | None = None) -> Topology:
    """Load a shipped topology by name, or a YAML file by path.

    Parameters
    ----------
    name_or_path : str or Path
        A name from :func:`list_topologies` (``"hgx-h200-8"``), or a path to a
        ``.yaml``/``.yml`` file.
    world : int, optional
        Rank count for a loopback topology (overrides its ``ranks``).
    gpus : int, optional
        Use only the first ``gpus`` GPUs of the system, each with its own links as in
        the file (a box with some GPUs idle, e.g. two GPUs of an HGX). The name becomes
        ``<name>-<gpus>of<N>`` (``hgx-h200-8`` -> ``hgx-h200-2of8``); all N is the file
        itself. Files whose links are listed ``pairs`` cannot be cut this way.

    Raises
    ------
    TopologyError
        If the name is unknown, the file is missing or not YAML, its content is
        invalid (the message names the file and the field), or ``gpus`` does not fit.

    Examples
    --------
    >>> load_topology("hgx-h200-8").world
    8
    >>> load_topology("h200-loopback", world=4).world
    4
    >>> two = load_topology("hgx-h200-8", gpus=2)
    >>> two.name, two.world, two.link("gpu1->nvswitch").bandwidth_gbps
    ('hgx-h200-2of8', 2, 370.0)
    """
    text, where = _read(name_or_path)
    data = _yaml(text, where)
    if gpus is not None:
        data, where = _first_gpus(data, gpus, where)
    return parse_topology(data, where=where, world=world)


def _first_gpus(data: object, gpus: int, where: str) -> tuple[dict, str]:
    """The topology mapping cut to its first ``gpus`` GPUs (see :func:`load_topology`),
    and the name for messages; all of them: the file unchanged."""
    if not isinstance(data, dict) or isinstance(data.get("gpus"), bool) or not isinstance(data.get("gpus"), int):
        raise TopologyError(f"{where}: gpus: the file has no GPU count to cut")
    total = data["gpus"]
    if isinstance(gpus, bool) or not isinstance(gpus, numbers.Integral) or not 1 <= gpus <= total:
        hint = ("; a loopback file runs all its ranks on one GPU: give world= for the rank count"
                if data.get("loopback") is True else "")
        raise TopologyError(f"{where}: gpus={gpus!r}: must be an int from 1 to the file's {total} "
                            f"GPU{'s' if total != 1 else ''}{hint}")
    gpus = int(gpus)
    if any(isinstance(group, dict) and "pairs" in group for group in data.get("links") or ()):
        raise TopologyError(f"{where}: gpus={gpus}: links listed as pairs cannot be cut to fewer GPUs "
                            "(write a file for the smaller system)")
    if gpus == total:
        return data, where
    name = str(data.get("name", ""))
    suffix = f"-{total}"
    cut = f"{name[: -len(suffix)]}-{gpus}of{total}" if name.endswith(suffix) else f"{name}-{gpus}of{total}"
    return {**data, "gpus": gpus, "name": cut}, f"{where} with {gpus} GPUs"


def _decode(data: bytes, where: str) -> str:
    """The file's text; a binary or non-UTF-8 file is a TopologyError, not a traceback."""
    if b"\0" in data:
        raise TopologyError(f"{where}: is a binary file, not YAML text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TopologyError(f"{where}: is not UTF-8 text (byte {e.start}: "
                            f"{data[e.start:e.start + 1]!r}); save it as UTF-8 YAML") from None


def _read(name_or_path: str | Path) -> tuple[str, str]:
    """(file text, name for messages): the file name for shipped ones, else the path."""
    if not isinstance(name_or_path, (str, Path)):
        raise TopologyError(f"topology {name_or_path!r:.60}: expected a shipped name or a path, "
                            f"got {type(name_or_path).__name__}")
    raw = str(name_or_path)
    if not raw.strip():
        raise TopologyError("topology '': empty name; shipped: " + ", ".join(list_topologies()))
    if isinstance(name_or_path, Path) or raw.endswith((".yaml", ".yml")) or "/" in raw or "\\" in raw:
        path = Path(name_or_path)
        if path.is_dir():
            raise TopologyError(f"{raw}: is a folder, not a topology file")
        if not path.is_file():
            raise TopologyError(f"{raw}: no such topology file")
        try:
            size = path.stat().st_size
            if size > MAX_FILE_NBYTES:
                raise TopologyError(f"{raw}: {size:,} B is too large for a topology file (at most "
                                    f"{MAX_FILE_NBYTES:,} B); is it the right file?")
            data = path.read_bytes()
        except OSError as e:
            raise TopologyError(f"{raw}: cannot read it ({e.strerror or e})") from None
        return _decode(data, raw), raw
    entry = data_root().joinpath(f"{raw}.yaml")
    if not entry.is_file():
        raise TopologyError(
            f"unknown topology {raw!r}; shipped: {', '.join(list_topologies())} (or give a path to a .yaml file)"
        )
    return entry.read_text(encoding="utf-8"), f"{raw}.yaml"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (plain PyYAML keeps the last silently)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a name, got a {type(key).__name__}", key_node.start_mark
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _yaml(text: str, where: str) -> object:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except RecursionError:
        raise TopologyError(f"{where}: not valid YAML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as err:   # e.g. a date like 2024-13-45
        raise TopologyError(f"{where}: not valid YAML: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise TopologyError(f"{where}: {at}not valid YAML: {problem}") from None
