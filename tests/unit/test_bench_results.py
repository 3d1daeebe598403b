"""bench/RESULTS.md cannot drift from what the benchmarks recorded: it is exactly bench/report.py's rendering of
bench/results.json, every section says the commit, date, machine and load it was measured on, and each benchmark has
a docs page of its own, under 15 KB, that shows its section."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

from bench.report import COMMANDS, OWN_SECTIONS, TITLES, provenance, render, write_own_section

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "RESULTS.md"
PAGES = ROOT / "docs" / "benchmarks" / "results"


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_md_is_the_rendering_of_results_json():
    """Edit results.json through a benchmark (`python -m bench NAME`), never RESULTS.md by hand."""
    rendered = render(json.loads((ROOT / "bench" / "results.json").read_text()), ROOT / "bench")
    assert rendered == RESULTS.read_text(), "bench/RESULTS.md differs from bench/results.json: run the report again"


def test_every_section_with_figures_says_its_commit_date_machine_and_load():
    results = json.loads((ROOT / "bench" / "results.json").read_text())
    measured = [key for key in TITLES if key in results]
    assert measured, "no benchmark has figures"
    for key in measured:
        where = results["machines"][key]
        assert {"commit", "date", "cores", "memory_gib"} <= where.keys(), key
        line = provenance(where)
        assert where["commit"] in line and where["date"] in line and f"{where['cores']} cores" in line, line
        assert "load average" in line or "load as it began not recorded" in line, line


def test_provenance_names_the_load_and_the_cpu_when_recorded():
    line = provenance({"commit": "abc123", "date": "2026-11-28T07:00:00+00:00", "cores": 2, "cpu": "AMD EPYC",
                       "memory_gib": 23.5, "load_average": [1.25, 0.5, 0.25]})
    assert line == ("*Measured 2026-11-28T07:00:00+00:00 on commit `abc123`; 2 cores (AMD EPYC), 23.5 GiB; load average "
                    "1.2/0.5/0.2 (1/5/15 min) as it began.*")
    assert provenance(None) == "*Where and when: not recorded.*"


def test_a_benchmark_without_figures_shows_none_rather_than_old_ones(tmp_path):
    text = render({"machine": {}, "machines": {}}, tmp_path)  # no results.json figures, no reply_interest.json
    for key, title in TITLES.items():
        assert f"<!-- section: {key} -->\n## {title}\n\nNo figures measured on the current code: `{COMMANDS[key]}`" in text


def test_each_benchmark_has_a_page_in_the_nav_that_shows_its_section_under_15_kb():
    module = hooks()
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = json.dumps(config["nav"])
    shown = {}
    for page in sorted(PAGES.glob("*.md")):
        (key,) = re.findall(r"^<!-- include: bench/RESULTS.md#(\w+) -->$", page.read_text(), re.M)
        shown[key] = page
        assert f"benchmarks/results/{page.name}" in nav, page
        rendered = module.on_page_markdown(page.read_text(), page=None, config=None, files=None)
        assert len(rendered.encode()) <= 15 * 1024, (page.name, len(rendered.encode()))
        if key in TITLES:
            assert rendered.lstrip().startswith(f"# {TITLES[key]}\n"), page.name  # the section's title is the page's
    assert sorted(shown) == sorted([*TITLES, *OWN_SECTIONS])
    overview = module.on_page_markdown("<!-- include: bench/RESULTS.md#overview -->", page=None, config=None, files=None)
    assert overview.startswith("# Benchmark results") and "<!-- section:" not in overview


def test_a_section_a_benchmark_writes_itself_is_replaced_by_its_marker_and_kept_by_the_report(tmp_path):
    path = tmp_path / "RESULTS.md"
    write_own_section(path, "replies", "## Replies\n\nfirst")
    write_own_section(path, "writing", "## Drafts\n\nsecond")
    write_own_section(path, "replies", "## Replies\n\nagain")
    assert path.read_text() == ("# Benchmark results\n\n<!-- section: replies -->\n## Replies\n\nagain\n\n"
                                "<!-- section: writing -->\n## Drafts\n\nsecond\n")
    text = render({"machine": {}, "machines": {}}, tmp_path)
    assert text.endswith("<!-- section: replies -->\n## Replies\n\nagain\n\n<!-- section: writing -->\n## Drafts\n\n"
                         "second\n")
    assert set(OWN_SECTIONS) & set(TITLES) == set()


def test_an_unknown_section_fails_the_build():
    with pytest.raises(ValueError, match="has no section 'nothing'"):
        hooks().on_page_markdown("<!-- include: bench/RESULTS.md#nothing -->", page=None, config=None, files=None)
