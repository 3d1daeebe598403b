"""tests/every_test_runs.py: a session that ran fewer tests than it collected fails, and tests whose ids collide are
told apart or refused (pytest-xdist would run one of them)."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = """
    import pytest

    @pytest.mark.parametrize("n", [1, 2])
    def test_numbered(n):
        assert n

    def test_plain():
        pass
"""


def pytest_in(tmp_path: Path, conftest: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(conftest))
    (tmp_path / "test_some.py").write_text(textwrap.dedent(TESTS))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.every_test_runs", "-p", "no:randomly",
                           "-p", "no:cacheprovider", "-q", *args, str(tmp_path)],
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)


def test_a_session_that_runs_every_test_passes(tmp_path):
    done = pytest_in(tmp_path, "")
    assert done.returncode == 0, done.stdout
    assert "3 passed" in done.stdout


def test_a_test_collected_and_never_run_fails_the_session(tmp_path):
    swallow = """
        def pytest_runtest_protocol(item, nextitem):
            return True if item.name == "test_plain" else None  # claimed, never run: as a lost test looks
    """
    done = pytest_in(tmp_path, swallow)
    assert done.returncode == 1, done.stdout
    assert "3 tests were collected but 2 ran" in done.stdout


def test_an_item_whose_id_lost_its_name_gets_its_name_back(tmp_path):
    """As Schemathesis's items are built under pytest 9.2: the name carries the operation, the id does not."""
    renamed = """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_modifyitems(items):
            for item in items:
                if item.name == "test_plain":
                    item.name, item.originalname = "test_plain[GET /runs]", "test_plain"
                    item._id = item.parent.id.child("test_plain")
                elif item.name.startswith("test_numbered"):
                    item.name = item.originalname = "test_numbered"  # two tests, one id, nothing to tell them by
                    item._id = item.parent.id.child("test_numbered")
    """
    done = pytest_in(tmp_path, renamed, "--co")
    assert done.returncode == 4, done.stdout  # a usage error
    assert "1 test id(s) name more than one test" in done.stdout + done.stderr
    assert "test_numbered" in done.stdout + done.stderr


def test_parallel_workers_run_every_test_of_colliding_names(tmp_path):
    renamed = """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_modifyitems(items):
            for item in items:
                if item.name.startswith("test_numbered"):
                    item._id = item.parent.id.child("test_numbered")  # the id pytest 9.2 gives Schemathesis's items
    """
    done = pytest_in(tmp_path, renamed, "-n", "2", "--dist", "loadfile")
    assert done.returncode == 0, done.stdout
    assert "3 passed" in done.stdout
