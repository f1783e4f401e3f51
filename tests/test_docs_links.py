"""Every link in the documentation stays inside the repository and resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "FUSION.md",
             *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = [*sorted((ROOT / "weft").rglob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py")),
           *sorted((ROOT / "examples").glob("*.py"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
OUTSIDE = re.compile(r"\.\./shared|\bshared/|(?<![\w/])(DESIGN|BENCHMARKING|BACKGROUND|CONVENTIONS)\.md")


def test_the_user_documents_exist():
    for name in ("design.md", "benchmarking.md", "contracts.md", "user-guide.md"):
        assert (ROOT / "docs" / name).stat().st_size > 1000


@pytest.mark.parametrize("path", DOCUMENTS + SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_leaves_the_repository(path):
    text = path.read_text()
    assert not OUTSIDE.search(text), f"{path}: {OUTSIDE.search(text).group(0)} is not in the repository"


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    for target in LINK.findall(path.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (path.parent / target).exists(), f"{path.name}: link {target} does not resolve"
