"""The public API is what the docs teach: ``import purlin`` covers planning, the Schedule's
file form, the reference executor and the simulator, and every public function, class
and method has a docstring."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest

import purlin
from purlin.snac import serialize

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL_EXTRAS = {"torch", "cupy", "distributed", "dask"}


def _public_modules() -> list:
    names = [m.name for m in pkgutil.walk_packages(purlin.__path__, "purlin.")
             if not any(part.startswith("_") for part in m.name.split("."))]
    mods = [purlin]
    for n in sorted(names):
        try:
            mods.append(importlib.import_module(n))
        except ModuleNotFoundError as e:   # a module over an optional extra not installed
            if e.name.split(".")[0] not in OPTIONAL_EXTRAS:
                raise
    return mods


def _public_callables():
    """(qualified name, object) of every public function and class defined in a public
    module, and of the public methods and properties of those classes."""
    for mod in _public_modules():
        for name, obj in vars(mod).items():
            if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if obj.__module__ != mod.__name__:
                continue
            yield f"{mod.__name__}.{name}", obj
            if inspect.isclass(obj):
                for attr, v in vars(obj).items():
                    v = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                    v = v.fget if isinstance(v, property) else v
                    if not attr.startswith("_") and inspect.isfunction(v):
                        yield f"{mod.__name__}.{name}.{attr}", v


def _has_docstring(obj) -> bool:
    doc = (obj.__doc__ or "").strip()
    # a dataclass without a docstring gets its signature as one
    return bool(doc) and not (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("))


def test_every_public_callable_has_a_docstring():
    found = list(_public_callables())
    assert len(found) > 250
    assert [name for name, obj in found if not _has_docstring(obj)] == []


@pytest.mark.parametrize("mod", _public_modules(), ids=lambda m: m.__name__)
def test_every_name_a_module_exports_exists_and_says_what_it_is(mod):
    for name in getattr(mod, "__all__", ()):
        obj = getattr(mod, name)   # lazy names too: they import on first use
        if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
            assert _has_docstring(obj), f"{mod.__name__}.{name}"


def test_the_facade_plans_saves_loads_and_hashes_a_schedule(tmp_path):
    c = purlin.library.all_reduce(4, 4096, "fp32")
    s = purlin.plan(c, purlin.minimal(4), purlin.Policy(regime="throughput"))
    path = s.save(tmp_path / "ar.json")
    back = purlin.Schedule.load(path)
    assert back == s and hash(back) == hash(s)
    assert back.digest() == s.digest() == serialize.digest(s) and len(s.digest()) == 16
    assert s.digest(programs_only=True) == serialize.programs_digest(s) != s.digest()
    assert purlin.Schedule.from_json(s.to_json()) == s
    assert path.read_text() == s.to_json() + "\n"
    x = [np.random.default_rng(r).standard_normal(1024).astype(np.float32) for r in range(4)]
    out = purlin.reference(back, x)
    assert all(np.array_equal(o, e) for o, e in zip(out, purlin.evaluate(c, x)))


def test_loading_a_missing_or_bad_schedule_file_names_it(tmp_path):
    with pytest.raises(purlin.ScheduleError, match=r"nope\.json: cannot read a schedule"):
        purlin.Schedule.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1}')
    with pytest.raises(purlin.ScheduleError, match=r"bad\.json: schedule schema_version 1 is not supported"):
        purlin.Schedule.load(bad)


def test_the_facade_simulates_predicts_and_sweeps():
    topo = purlin.minimal(2)
    s = purlin.plan(purlin.library.from_size("all_gather", 2, 1 << 16), topo)   # nccl-tests size
    full = purlin.simulate(s, calibration="synthetic")
    quick = purlin.simulate(s, calibration="synthetic", record=False)
    assert quick.time_us == full.time_us > 0 and quick.timeline == [] and full.timeline
    rows = purlin.predict("all_gather", topo, [1 << 16], calibration="synthetic")
    assert [r["time_us"] for r in rows] == [full.time_us]
    assert str(1 << 16) in purlin.format_table(rows)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as ex:
        res = purlin.sweep("all_gather", [1 << 16], [topo], executor=ex, calibration="synthetic",
                           progress=False)
    assert [r["time_us"] for r in res.rows] == [full.time_us]
    assert purlin.simulate is importlib.import_module("purlin.sim").simulate
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        purlin.simulat   # noqa: B018


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _taught() -> dict[str, str]:
    """The README, the docs and the notebooks 01 and 03 (their code cells)."""
    import json
    out = {"README.md": "\n".join(_python_blocks((ROOT / "README.md").read_text()))}
    for p in sorted((ROOT / "docs").glob("*.md")):
        out[f"docs/{p.name}"] = "\n".join(_python_blocks(p.read_text()))
    for stem in ("01-prototype-a-collective", "03-validate-on-gpu"):
        nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())
        out[stem] = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return out


def test_the_docs_and_notebooks_import_purlin_only():
    """Deep imports are for the package's own code; what we teach is ``import purlin``
    (and the GPU executor, ``purlin.backends.gpu``, which needs cupy)."""
    deep = re.compile(r"^\s*(from\s+purlin\.|import\s+purlin\.)")
    gpu = re.compile(r"purlin\.backends\.gpu\b|from\s+purlin\.backends\s+import\s+gpu\b")
    offenders = {name: [ln.strip() for ln in text.splitlines() if deep.match(ln) and not gpu.search(ln)]
                 for name, text in _taught().items()}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert "import purlin" in _taught()["README.md"]


def test_the_readme_python_examples_run(tmp_path, monkeypatch):
    """Every python block of the README runs as pasted (GPU blocks skip without cupy)."""
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert blocks
    for code in blocks:
        if "cupy" in code:
            continue
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
