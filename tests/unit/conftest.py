"""Unit tests are pure: a test here that opens a socket, starts a process or a database fails at once,
naming what it tried. Such a test belongs in tests/service (in process) or tests/e2e (processes)."""

import socket
import sqlite3
import subprocess

import psycopg
import pytest


def _refuse(what: str):
    def refused(*args, **kwargs):
        raise AssertionError(f"a unit test may not {what}: move it to tests/service or tests/e2e")

    return refused


@pytest.fixture(scope="package", autouse=True)
def pure():
    """For the whole folder, module fixtures included; undone after its last test."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _refuse("connect a socket"))
        patch.setattr(socket.socket, "connect_ex", _refuse("connect a socket"))
        patch.setattr(socket.socket, "bind", _refuse("bind a socket"))
        patch.setattr(subprocess.Popen, "__init__", _refuse("start a process"))
        patch.setattr(sqlite3, "connect", _refuse("open a SQLite database"))
        patch.setattr(psycopg.Connection, "connect", _refuse("connect to PostgreSQL"))
        yield
