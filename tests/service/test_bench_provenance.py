"""The commit a benchmark's figures name (`bench.commit`), read from a real git repository."""

import subprocess

from bench import commit


def test_a_figure_names_its_commit_and_changes_only_when_code_other_than_the_results_differs(tmp_path):
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args], cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout.strip()

    (tmp_path / "bench").mkdir()
    for name in ("bench/RESULTS.md", "bench/results.json", "app.py"):
        (tmp_path / name).write_text("first\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "first")
    head = git("rev-parse", "--short=10", "HEAD")
    assert commit(tmp_path) == head
    # a benchmark's own output, modified and not staged (its status line starts with a space): still the commit's code
    (tmp_path / "bench/RESULTS.md").write_text("measured\n")
    (tmp_path / "bench/results.json").write_text("measured\n")
    assert commit(tmp_path) == head
    (tmp_path / "app.py").write_text("changed\n")
    assert commit(tmp_path) == f"{head}+changes"
