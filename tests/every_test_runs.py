"""A pytest plugin: every collected test runs, or the session fails.

pytest-xdist hands tests out by node id, so two items with the same id are one test to it: the second never runs and
nothing says so. pytest 9.2 builds a test's id from its function's name and its `parametrize` ids only, and
Schemathesis names each API operation's test by `name` alone, so every operation of `test_with_a_key` had the same id
and under two workers one of them ran. Each item whose id lost its name's suffix gets the id its name says, a
collection with a duplicate id left is refused, and a session that ran fewer tests than it collected fails.
"""

from collections import Counter

import pytest

DUPLICATES_SHOWN = 5


def pytest_collection_modifyitems(config, items):
    for item in items:
        original = getattr(item, "originalname", item.name)
        if item.name != original and not item.nodeid.endswith(item.name[len(original):]):
            item._id = item.parent.id.child(item.name)  # what pytest names a node by default
    twice = [nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1]
    if twice:
        raise pytest.UsageError(f"{len(twice)} test id(s) name more than one test, so a parallel run would run only "
                                f"one of each: {', '.join(twice[:DUPLICATES_SHOWN])}")


class RanCount:
    """The tests that ran to an outcome: a call's report, or a setup's that did not pass (skipped or errored)."""

    def __init__(self) -> None:
        self.ran = 0

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.ran += 1


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # in an xdist worker, the controller counts
        config.pluginmanager.register(RanCount(), "every_test_runs")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    counter = session.config.pluginmanager.get_plugin("every_test_runs")
    if counter is None or session.config.option.collectonly or exitstatus != pytest.ExitCode.OK:
        return  # already failing (or interrupted, or stopped at the first failure): that says enough
    if counter.ran < session.testscollected:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"{session.testscollected} tests were collected but {counter.ran} ran: "
                   f"{session.testscollected - counter.ran} never did (see tests/every_test_runs.py)")
        if reporter is not None:
            reporter.write_sep("=", message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
