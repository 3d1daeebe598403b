"""Importing the app and running a whole loop touch nothing beyond loopback, and never read stdin."""

import json
import os
import subprocess
import sys

import pytest

GUARDED_RUN = r"""
import json, socket, sys
LOOPBACK = ("127.0.0.1", "::1", "localhost")
attempts = []
real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
        attempts.append(repr(address))
        raise OSError("blocked by test")
    return real_connect(self, address)

def getaddrinfo(host, *args, **kwargs):
    if host not in LOOPBACK and host is not None:
        attempts.append(f"dns {host}")
        raise socket.gaierror("blocked by test")
    return real_getaddrinfo(host, *args, **kwargs)

socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo

import app  # noqa
if sys.argv[1] == "run":
    from app.cli import main
    sys.argv = ["codreamer", "run", "--iterations", "1", "--rollouts-per-group", "2",
                "--scenario", sys.argv[2], "--scenario", sys.argv[3]]
    try:
        main()
    except SystemExit as exit:
        assert not exit.code, exit.code
if sys.argv[1] == "weave":
    from app.kit.observability import init_tracing
    print("TRACING", init_tracing(sys.argv[2] or None, "codreamer-test"))
print("ATTEMPTS " + json.dumps(attempts))
"""


def guarded(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB", "OPENAI", "JUDGE", "WEAVE"))}
    process = subprocess.Popen(
        [sys.executable, "-c", GUARDED_RUN, *args], cwd=tmp_path, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output, _ = process.communicate(timeout=120)  # stdin stays open until this returns
    assert process.returncode == 0, output
    return output, json.loads(output.rsplit("ATTEMPTS ", 1)[1])


def test_import_opens_no_connection(tmp_path):
    _, attempts = guarded(tmp_path, "import")
    assert attempts == []


@pytest.mark.slow
def test_a_full_run_stays_on_loopback(tmp_path):
    from app.knowledge_graph.service import demo_graph

    first, second = list(demo_graph().scenarios)[:2]
    output, attempts = guarded(tmp_path, "run", first, second)
    assert attempts == []
    assert "Learning loop" in output and "citations:" in output


def test_weave_stays_off_unless_configured_and_never_blocks(tmp_path):
    output, attempts = guarded(tmp_path, "weave", "")
    assert "TRACING False" in output and attempts == []
    output, _ = guarded(tmp_path, "weave", "a-key-with-no-network-behind-it")
    assert "TRACING False" in output and "Weave tracing is off" in output


def test_weave_is_not_even_imported_while_tracing_is_off():
    """Importing weave costs each process about 1.5 s of CPU; off, the traced steps are the plain functions."""
    check = ("import sys, app.main, app.runs.workflow; from app.loop.credit import reweight; "
             "assert reweight.__wrapped__ is not None and 'weave' not in sys.modules, sorted(m for m in sys.modules if 'weave' in m)")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
