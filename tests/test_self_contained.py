"""The repository stands alone: no tracked file cites material outside it (the spec and the papers that once lived
in a shared folder next to the checkout); docs/paper.md holds what the project needs of them, and citations point
there. The forbidden strings are assembled from parts so that this file does not cite them itself."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
S, SHARED, SEEDS = "SP" + "EC", ".." + "/shared", "shared" + "/seeds"
# the shared folder, its seeds, the spec file, and the spec cited as a source: "<S> section 5", "<S> §5", "(<S>)",
# "the <S>", "<S>'s". A Python name (the apps pages' diagnostic object `make_layout(<S>)`) is not a citation.
OUTSIDE = re.compile(rf"{re.escape(SHARED)}|{SEEDS}|{S}\.md|(?<![\w.])\({S}\)|\b{S}(?:'s|\s+sections?\b|\s*§)"
                     rf"|\bthe {S}\b")


def _tracked_text_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    for name in filter(None, out.decode().split("\0")):
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (images, parquet)
        yield name, data.decode("utf-8", errors="replace")


def test_pattern_catches_the_old_citations():
    for cited in [f"see {SHARED}/{S}.md", f"({S} section 6)", f"{S} §5", f"Starting point ({S}):",
                  f"the {S} starting point", f"the {S}'s 14 %", f"`{SHARED}/seeds/`"]:
        assert OUTSIDE.search(cited), cited
    for fine in [f"{S} = Diagnostic(", f"layout = make_layout({S})", f"register(app, {S})",
                 f"from apps.pages.spectral import {S}", "docs/paper.md §6", "/shared/pelab/runs"]:
        assert not OUTSIDE.search(fine), fine


def test_no_tracked_file_cites_outside_the_repository():
    hits = [f"{name}:{i}: {line.strip()[:100]}"
            for name, text in _tracked_text_files()
            for i, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, ("cite docs/paper.md (with a section) instead of the spec or papers outside the repository; "
                      "generated files (results/repro/COMPARISON.md, the README findings block) need "
                      "`workbench compare` re-run:\n" + "\n".join(hits))


def test_paper_doc_has_the_sections_cited():
    text = (ROOT / "docs" / "paper.md").read_text()
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^## (.+)$", text, flags=re.M)}
    for name, body in _tracked_text_files():
        for anchor in re.findall(r"paper\.md#([\w\-]+)", body):
            assert anchor in anchors, f"{name} links paper.md#{anchor}, not a heading of docs/paper.md"
    for n in range(1, 8):
        assert any(a.startswith(f"{n}-") for a in anchors), f"docs/paper.md lacks section {n}"
    assert "88.34" in text and "92.64" in text and "3.51" in text  # Table 1
