"""Shared by every kind of test. The kind comes from the folder: tests/unit, tests/service and
tests/e2e get the markers `unit`, `service` and `e2e` (`pytest -m unit`, or `pytest tests/unit`)."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TQDM_DISABLE", "1")
# ART_PATH is one per database (a worker removes the folders there of runs its database does not have): the apps this
# test process runs in process keep theirs in a folder of its own, not in the checkout's .art beside other processes'.
if "ART_PATH" not in os.environ:
    os.environ["ART_PATH"] = tempfile.mkdtemp(prefix="codreamer-tests-art-")
    atexit.register(shutil.rmtree, os.environ["ART_PATH"], ignore_errors=True)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from app.backends.embedded import EmbeddedBackend  # noqa: E402
from tests import every_test_runs  # noqa: E402

TESTS = Path(__file__).resolve().parent
KINDS = ("unit", "service", "e2e")


def pytest_configure(config):
    config.pluginmanager.register(every_test_runs, "every_test_runs_checks")


def pytest_collection_modifyitems(config, items):
    for item in items:
        kind = item.path.resolve().relative_to(TESTS).parts[0]
        if kind not in KINDS:
            raise pytest.UsageError(f"{item.path}: a test lives in tests/unit, tests/service or tests/e2e, by kind (see docs/guide/developing.md)")
        item.add_marker(kind)


@pytest.fixture
async def backend():
    backend = EmbeddedBackend()
    yield backend
    await backend.close()
