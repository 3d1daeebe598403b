"""The docs site builds in strict mode with no network, from the repository as it is, and loads nothing from
elsewhere; a broken link fails the build (`make docs` is the same command)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.kit.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
# mkdocs in a process whose sockets refuse to connect: a build that reached for the network would fail
OFFLINE_MKDOCS = """
import socket, sys
def refuse(*args, **kwargs):
    raise OSError("the docs build may not open a connection")
socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = refuse
from mkdocs.__main__ import cli
sys.exit(cli(sys.argv[1:]))
"""
REMOTE_LOAD = re.compile(r"<(?:script|link|img|iframe|source|video|audio)\b[^>]*\b(?:src|href)=[\"']((?:https?:)?//[^\"']+)",
                         re.IGNORECASE)


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", OFFLINE_MKDOCS, "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=180,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site.parent)})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("docs") / "site"
    result = build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "WARNING" not in result.stderr, result.stderr[-3000:]
    return site


def nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_page_is_built_and_loads_nothing_from_elsewhere(site):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = nav_pages(config["nav"])
    assert sorted(pages) == sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    for page in pages:
        html = site / (page.removesuffix(".md").removesuffix("index") + "/index.html").lstrip("/")
        assert html.is_file(), page
    for html in site.rglob("*.html"):
        text = html.read_text()
        assert not REMOTE_LOAD.findall(text), (html, REMOTE_LOAD.findall(text))
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, html
        assert 'class="mermaid"' not in text, html  # Material would fetch Mermaid from a CDN
    for css in site.rglob("*.css"):
        assert not re.search(r"@import|url\(\s*[\"']?(https?:)?//", css.read_text()), css


def test_the_generated_pages_come_from_the_code(site):
    settings = (site / "reference" / "settings" / "index.html").read_text()
    for name in Settings.model_fields:
        assert f"<code>{name.upper()}</code>" in settings, name
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "<code>codreamer db check</code>" in cli and "<code>--rollouts-per-group</code>" in cli
    api = (site / "reference" / "http-api" / "index.html").read_text()
    assert "<code>/learn-loop</code>" in api and "<code>iteration.completed</code>" in api
    results = (site / "benchmarks" / "results" / "index.html").read_text()  # bench/RESULTS.md, the one home of figures
    assert "Benchmark results" in results and "Orchestration efficiency" in results  # the overview's table
    page = (site / "benchmarks" / "results" / "orchestration" / "index.html").read_text()  # a page per benchmark
    assert "Orchestration efficiency" in page and "critical-path bound" in page and "p99 &lt; 50 ms" not in page


def test_a_broken_link_fails_the_build(tmp_path):
    """Strict mode with the link checks of mkdocs.yml: a link to a page or a section that does not exist fails the build."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path)
    (tmp_path / "bench").mkdir()
    for name in ["RESULTS.md", *(p.name for p in (ROOT / "bench").glob("*.png"))]:
        shutil.copy(ROOT / "bench" / name, tmp_path / "bench")
    page = tmp_path / "docs" / "guide" / "runs.md"
    page.write_text(page.read_text() + "\nSee [the missing page](missing.md) and [a missing section](knowledge-graphs.md#gone).\n")
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "missing.md" in result.stderr and "#gone" in result.stderr, result.stderr[-3000:]
