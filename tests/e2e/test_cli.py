import json
import subprocess
import sys
from pathlib import Path

import app

SOURCE = str(Path(app.__file__).resolve().parent.parent)  # the checkout under test, not whichever one is installed


def codreamer(*args, cwd):
    """The command line in its own process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "TQDM_DISABLE": "1", "COLUMNS": "200", "PYTHONPATH": SOURCE})


def test_bad_graph_file_names_the_culprit(tmp_path):
    bad = tmp_path / "graph.json"
    bad.write_text(json.dumps({
        "id": "g", "name": "G", "nodes": [{"id": "a", "type": "t", "title": "A", "text": "x"}],
        "edges": [{"source": "a", "target": "ghost", "relation": "r"}],
        "scenarios": [{"id": "s", "goal": "g", "seed_nodes": ["a"],
                       "prospect": {"name": "N", "role": "R", "company": "C", "industry": "I"}}],
    }))
    result = codreamer("run", "--graph", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert "ghost" in result.stderr


def test_unknown_scenario_is_a_usage_error_and_nothing_is_left_behind(tmp_path):
    result = codreamer("run", "--iterations", "1", "--scenario", "nope", cwd=tmp_path)
    assert result.returncode == 2
    assert "nope" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_out_of_range_options_are_refused(tmp_path):
    result = codreamer("run", "--iterations", "0", cwd=tmp_path)
    assert result.returncode == 2 and "iterations" in result.stderr


def test_bounds_are_run_configs_own(tmp_path):
    """The options are checked by RunConfig itself, so they cannot drift from POST /learn-loop's bounds."""
    for option, value, bound in (("--top-fraction", "0", "greater than 0"), ("--learning-rate", "0", "greater than 0"),
                                 ("--learning-rate", "1.5", "less than or equal to 1")):
        result = codreamer("run", option, value, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert option in result.stderr and bound in result.stderr
        assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []
