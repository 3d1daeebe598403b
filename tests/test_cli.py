import json

from typer.testing import CliRunner

from app.cli import app

runner = CliRunner()


def test_bad_graph_file_names_the_culprit(tmp_path):
    bad = tmp_path / "graph.json"
    bad.write_text(json.dumps({
        "id": "g", "name": "G", "nodes": [{"id": "a", "type": "t", "title": "A", "text": "x"}],
        "edges": [{"source": "a", "target": "ghost", "relation": "r"}],
        "scenarios": [{"id": "s", "goal": "g", "seed_nodes": ["a"],
                       "prospect": {"name": "N", "role": "R", "company": "C", "industry": "I"}}],
    }))
    result = runner.invoke(app, ["run", "--graph", str(bad)])
    assert result.exit_code == 2
    assert "ghost" in result.output


def test_unknown_scenario_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", "--iterations", "1", "--scenario", "nope"])
    assert result.exit_code == 2
    assert "nope" in result.output


def test_out_of_range_options_are_refused():
    result = runner.invoke(app, ["run", "--iterations", "0"])
    assert result.exit_code == 2 and "iterations" in result.output
