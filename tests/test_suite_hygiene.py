"""The suite itself: no test times the wall clock or reaches into benchmarks/, scripts need
no path setup, and skips say why, one line per reason."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
CLOCKS = re.compile(r"\btime\.(perf_counter|monotonic|time|process_time)(_ns)?\(|\btimeit\b")
BENCHMARK_IMPORT = re.compile(r"^\s*(import|from)\s+(benchmarks|common|gpu_common|validate|fit_calibration|"
                              r"calibrate_executor|multi_gpu)\b", re.M)


def _sources(folder: str, pattern: str = "*.py") -> list[Path]:
    return sorted((ROOT / folder).rglob(pattern))


def test_no_test_reads_the_wall_clock():
    """Speed is a benchmark's figure (benchmarks/), never a test's assertion."""
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in _sources("tests") if p.name != Path(__file__).name
                 for i, line in enumerate(p.read_text().splitlines(), 1) if CLOCKS.search(line)]
    assert offenders == []


def test_no_test_or_notebook_imports_from_benchmarks_or_edits_sys_path():
    texts = {p: p.read_text() for p in _sources("tests") + _sources("notebooks", "*.ipynb")
             if p.name != Path(__file__).name}
    assert [str(p.relative_to(ROOT)) for p, t in texts.items() if "sys.path" in t] == []
    assert [str(p.relative_to(ROOT)) for p, t in texts.items() if BENCHMARK_IMPORT.search(t)
            or "import validate" in t] == []


def test_benchmark_scripts_need_no_path_setup():
    """They run as ``python3 benchmarks/NAME.py`` after ``pip install -e .``: Python puts
    the script's own folder first on sys.path, which is how they find common.py."""
    scripts = _sources("benchmarks")
    assert len(scripts) >= 10
    assert [p.name for p in scripts if "sys.path" in p.read_text()] == []


def test_skips_are_summarised_one_line_per_reason(pytester):
    hook = (ROOT / "tests" / "conftest.py").read_text()
    pytester.makeconftest(hook)
    pytester.makepyfile(test_some="""
        import pytest

        @pytest.mark.parametrize("i", range(3))
        def test_needs_a_gpu(i):
            pytest.skip("no GPU here")

        @pytest.mark.skip(reason="not on this platform")
        def test_other():
            pass

        def test_runs():
            assert 1 + 1 == 2
    """)
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=4)
    out = result.stdout.str()
    assert "skipped, by reason" in out
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().endswith(("no GPU here", "not on this platform"))]
    assert lines == ["3  no GPU here", "1  not on this platform"]
