"""The README and docs/ link to what exists, and every ``source`` in topologies/ cites a
section of docs/sources.md or a file in the repository, never notes outside it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTSIDE = re.compile(r"FACTS|PURLIN-NOTES|/work/|DESIGN\.md|STYLE\.md")
FILE = re.compile(r"[\w./-]+\.(?:json|md|py|cuh?|yaml|png|sh)\b")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a markdown page."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def repo_files() -> set[str]:
    """Every file's path relative to the root, and its bare name."""
    paths = [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    return {str(p.relative_to(ROOT)) for p in paths} | {p.name for p in paths}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve_to_files_and_headings(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: link to {target}"
        if anchor:
            assert anchor in anchors(dest), f"{page.name}: no heading #{anchor} in {dest.name}"


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 150
    assert lines[3:5] == ["python3 -m pip install -e . && purlin sim --topology hgx-h200-8 --sizes 1K:1G",
                          "python3 -m pip install -e '.[dev]' && python3 -m pytest"]
    assert "[...]" not in text and text.count("![") == 1
    table = [ln for ln in text.split("## Headline results")[1].split("\n## ")[0].splitlines()
             if ln.startswith("| ") and not ln.startswith("| figure")]
    assert 1 <= len(table) <= 8 and all("docs/" in row for row in table)


def _sources() -> list[tuple[str, str]]:
    """(where, text) of every source field and comment in topologies/."""
    out = []
    for path in sorted((ROOT / "topologies").glob("*.yaml")):
        text = path.read_text()
        out.append((path.name, yaml.safe_load(text)["source"]))
        out += [(f"{path.name} comment", c) for c in re.findall(r"#(.*)$", text, re.M)]
    for path in sorted((ROOT / "topologies" / "calibration").glob("*.json")):
        doc = json.loads(path.read_text())
        out.append((path.name, doc["source"]))
        out += [(f"{path.name} {key}", p["source"]) for key, p in doc["parameters"].items()]
    return out


def test_every_source_cites_docs_or_a_file_in_the_repo():
    sections = anchors(ROOT / "docs" / "sources.md")
    files = repo_files()
    sources = _sources()
    assert len(sources) > 300
    assert [w for w, s in sources if OUTSIDE.search(s)] == []
    cited = [(w, a or b) for w, s in sources for a, b in re.findall(r"sources\.md#([\w-]+)|\(#([\w-]+)", s)]
    assert len(cited) > 80
    assert [(w, a) for w, a in cited if a not in sections] == []
    missing = [(w, f) for w, s in sources for f in FILE.findall(s)
               if f not in files and Path(f).name not in files and f != "sources.md"]
    assert missing == []
