"""On PostgreSQL the API keeps each run's version, and updates it from the database's notices (issue 20).

A poll of a run, its iterations or a runs page used to cost a round trip to PostgreSQL for the version, and on a
busy machine that trip was most of the slowest polls. Migration 0009's trigger NOTIFYs `run_versions` with the run's
new version at commit; the API listens, keeps what it read and takes each announced version in place. Writes made
here with the trigger switched off (`session_replication_role = replica`) show what a read would have missed: the
answer stays until a notice comes.
"""

import asyncio
import contextlib
import json
import logging
import struct
import time
from urllib.parse import urlsplit

import psycopg
import pytest

from app.kit import conditional
from app.kit.db import LISTEN_CHECK_S, Database, KeptReads
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.runs.endpoints import RENDERED
from app.runs.repository import RUN_VERSIONS, version

BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 3}


def write(url: str, sql: str, *params, announced: bool = True) -> None:
    """A write by another process; unannounced, the trigger does not fire."""
    with psycopg.connect(url, autocommit=True) as connection:
        if not announced:
            connection.execute("SET session_replication_role = replica")
        connection.execute(sql, params)


async def until(condition, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (result := await condition()):
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.05)
    return result


@pytest.fixture
async def service(api_node, postgres_url):
    """An API node (no run worker here: its commits would drop what is kept) with one queued run."""
    async with api_node(postgres_url, BODY) as node:
        yield node


async def kept_by(client, db: Database, paths: list[str]) -> dict[str, str]:
    """The tags of `paths` once the API listens and has kept what they read."""
    kept = db.kept(RUN_VERSIONS)

    async def tags():
        answers = {path: await client.get(path) for path in paths}
        return kept.listening and kept.rows and kept.queries and {p: a.headers["etag"] for p, a in answers.items()}

    first = await until(tags)
    assert await tags() == first  # read again from what was kept
    return first


async def test_a_run_read_is_kept_until_its_change_is_announced(service, postgres_url):
    client, db, run_id = service
    paths = [f"/runs/{run_id}", f"/runs/{run_id}/iterations", "/runs?limit=5"]
    before = await kept_by(client, db, paths)

    write(postgres_url, "UPDATE runs SET last_seq = last_seq + 1 WHERE id = %s", run_id, announced=False)
    await asyncio.sleep(0.5)
    assert {p: (await client.get(p)).headers["etag"] for p in paths} == before  # kept: no trip to the database

    write(postgres_url, "SELECT pg_notify('run_versions', %s)", json.dumps({"key": run_id}))  # named only: read again
    after = await until(lambda: _changed(client, paths, before))
    assert after == {p: (await client.get(p)).headers["etag"] for p in paths}

    write(postgres_url, "UPDATE runs SET last_seq = last_seq + 1 WHERE id = %s", run_id)  # the trigger announces it
    await until(lambda: _changed(client, paths, after))


async def test_an_announced_version_is_taken_as_it_comes_without_reading_the_run(service, postgres_url):
    client, db, run_id = service
    paths = [f"/runs/{run_id}", "/runs?limit=5"]
    await kept_by(client, db, paths)
    page = db.kept(RUN_VERSIONS).queries.copy()
    # What no read could return (the stored last_seq is 1): seen only if the notice's row is used as it is.
    row = [run_id, "public", 1, 999, "queued", None]
    write(postgres_url, "SELECT pg_notify('run_versions', %s)", json.dumps({"key": run_id, "row": row, "moved": False}))
    tag = conditional.entity_tag(run_id, 1, 999, "queued", False)
    await until(lambda: _true(db.kept(RUN_VERSIONS).rows.get(run_id) == tuple(row)))
    assert (await client.get(paths[0])).headers["etag"] == tag
    assert db.kept(RUN_VERSIONS).queries.keys() == page.keys()  # the page was updated in place, not read again
    assert [r[3] for r in db.kept(RUN_VERSIONS).queries[("public", 5, None, None)]] == [999]

    moved = [run_id, "public", 1, 999, "running", None]  # a change of status may move the run into or out of a list
    write(postgres_url, "SELECT pg_notify('run_versions', %s)", json.dumps({"key": run_id, "row": moved, "moved": True}))
    await until(lambda: _true(not db.kept(RUN_VERSIONS).queries))


async def test_a_served_run_s_new_version_is_rendered_before_it_is_answered_with(service, postgres_url):
    client, db, run_id = service
    await kept_by(client, db, [f"/runs/{run_id}", "/runs?limit=5"])
    kept = db.kept(RUN_VERSIONS)

    async def announced(old: tuple) -> str:
        """The tag of the run's next version, once this process has taken it."""
        async def taken():
            return kept.rows.get(run_id) not in (None, old) and kept.rows[run_id]

        write(postgres_url, "UPDATE runs SET last_seq = last_seq + 1 WHERE id = %s", run_id)
        return conditional.entity_tag(*version(*await until(taken)))

    tag = await announced(kept.rows[run_id])
    assert RENDERED.get((tag, "run")) is not None  # no poll made it: it was there when the version was taken
    assert RENDERED.get((tag, "iterations")) is None  # nobody asked for the run's iterations: not rendered ahead
    answer = await client.get(f"/runs/{run_id}")
    assert answer.headers["etag"] == tag and answer.content == RENDERED.get((tag, "run"))

    listed = await client.get(f"/runs/{run_id}/iterations")  # now served at this version, so rendered for the next
    tag = await announced(kept.rows[run_id])
    assert RENDERED.get((tag, "iterations")) == listed.content
    answer = await client.get(f"/runs/{run_id}/iterations")
    assert answer.headers["etag"] == tag and answer.content == listed.content


async def _changed(client, paths: list[str], before: dict[str, str]) -> dict[str, str] | None:
    tags = {p: (await client.get(p)).headers["etag"] for p in paths}
    return tags if all(tags[p] != before[p] for p in paths) else None


async def test_nothing_is_kept_across_a_lost_listening_connection(service, postgres_url):
    client, db, run_id = service
    paths = [f"/runs/{run_id}", "/runs?limit=5"]
    before = await kept_by(client, db, paths)
    kept = db.kept(RUN_VERSIONS)

    write(postgres_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
          f"codreamer listen {RUN_VERSIONS}")
    await until(lambda: _true(not kept.listening))  # no read meanwhile, so no new listener yet
    assert kept.rows == {} and kept.queries == {}
    # Notices sent while no connection listened are lost: a change made now must still show.
    write(postgres_url, "UPDATE runs SET last_seq = last_seq + 1 WHERE id = %s", run_id, announced=False)
    await until(lambda: _changed(client, paths, before))
    await kept_by(client, db, paths)  # and it listens again


async def test_a_commit_of_this_process_drops_what_was_kept_so_its_client_reads_its_own_write(postgres_url):
    db = Database(Settings(_env_file=None, database_url=postgres_url))
    try:
        kept = db.kept(RUN_VERSIONS)
        await until(lambda: _true(kept.listening))
        kept.keep_row(kept.token(), "run_a", ("public", "run_a", 1, 1, "running", None))
        kept.keep_query(kept.token(), ("public", 5, None, None), [])
        async with db.transaction():
            pass
        assert kept.rows == {} and kept.queries == {}
    finally:
        await db.close()


async def _true(value) -> bool:
    return bool(value)


def test_the_trigger_announces_a_change_of_a_run_s_version_with_the_new_version_and_nothing_else(postgres_url):
    from app.kit import migrations

    migrations.upgrade(postgres_url)
    write(postgres_url, "INSERT INTO graphs (id, name, created_at) VALUES ('g', 'g', now())")
    with psycopg.connect(postgres_url, autocommit=True) as listener:
        listener.execute("LISTEN run_versions")

        def announced(sql: str) -> list[dict]:
            write(postgres_url, sql)
            return [json.loads(n.payload) for n in listener.notifies(timeout=0.5)]

        def version(last_seq=0, status="queued", attempt=1, waiting=None, tenant="public", moved=False) -> list[dict]:
            return [{"key": "r", "row": ["r", tenant, attempt, last_seq, status, waiting], "moved": moved}]

        assert announced("INSERT INTO runs (id, tenant, status, graph_id, config, iterations_total, iterations_completed, "
                         "last_seq, attempt, created_at) VALUES ('r', 'public', 'queued', 'g', '{}', 1, 0, 0, 1, now())"
                         ) == version(moved=True)
        assert announced("UPDATE runs SET last_seq = 1 WHERE id = 'r'") == version(1)
        assert announced("UPDATE runs SET status = 'running' WHERE id = 'r'") == version(1, "running", moved=True)
        assert announced("UPDATE runs SET attempt = 2 WHERE id = 'r'") == version(1, "running", 2)
        until_one = '{"until": 1}'
        assert announced(f"UPDATE runs SET waiting = '{until_one}' WHERE id = 'r'") == version(1, "running", 2, until_one)
        assert announced(f"UPDATE runs SET waiting = '{until_one}' WHERE id = 'r'") == []  # the same value
        assert announced("UPDATE runs SET tenant = 'other' WHERE id = 'r'") == version(1, "running", 2, until_one, "other", True)
        assert announced("UPDATE runs SET iterations_completed = 1, started_at = now() WHERE id = 'r'") == []
        long = json.dumps({"note": "x" * 8000})  # past a notice's 8000 bytes: it names the run only
        assert announced(f"UPDATE runs SET waiting = '{long}' WHERE id = 'r'") == [{"key": "r"}]
        assert announced("DELETE FROM runs WHERE id = 'r'") == [{"key": "r"}]


def test_a_read_that_a_notice_overtook_is_not_kept():
    kept = KeptReads()
    assert kept.token() is None  # not listening: nothing is kept
    kept.keep_row(kept.token(), "a", ("row",))
    assert kept.rows == {}
    kept.listening = True
    token = kept.token()
    kept.changed("b")  # while the read of "a" ran: it may have read before that change
    kept.keep_row(token, "a", ("row",))
    kept.keep_query(token, ("page",), [])
    assert kept.rows == {} and kept.queries == {}
    token = kept.token()
    kept.keep_row(token, "a", ("row",))
    kept.keep_row(token, "b", ("row",))
    kept.keep_query(token, ("page",), [])
    kept.changed("a")
    assert kept.rows == {"b": ("row",)} and kept.queries == {}


async def test_an_announced_row_replaces_the_kept_one_and_a_query_s_unless_it_may_have_moved():
    kept = KeptReads()
    kept.listening = True
    kept.keep_row(kept.token(), "a", ("a", 1))
    kept.keep_query(kept.token(), ("page",), [("b", 1), ("a", 1)])
    await kept.announced(json.dumps({"key": "a", "row": ["a", 2], "moved": False}))
    assert kept.rows == {"a": ("a", 2)} and kept.queries == {("page",): [("b", 1), ("a", 2)]}
    await kept.announced(json.dumps({"key": "c", "row": ["c", 1], "moved": False}))  # not kept: nothing to replace
    assert kept.rows == {"a": ("a", 2)} and kept.queries == {("page",): [("b", 1), ("a", 2)]}
    await kept.announced(json.dumps({"key": "c", "row": ["c", 1], "moved": True}))  # may now be on the page
    assert kept.rows == {"a": ("a", 2)} and kept.queries == {}
    kept.keep_query(kept.token(), ("page",), [("a", 2)])
    await kept.announced(json.dumps({"key": "a"}))  # gone, or too long to announce
    assert kept.rows == {} and kept.queries == {}
    kept.keep_row(kept.token(), "b", ("b", 1))
    await kept.announced("not json")
    assert kept.rows == {}


@contextlib.asynccontextmanager
async def notice_dropping_proxy(url: str, drop: bool = True):
    """A loopback proxy to the PostgreSQL of `url` that passes everything but notices (NotificationResponse, 'A')
    if `drop`, as a pooler that loses them would; it declines TLS, so it can read the server's messages. Yields its
    URL."""
    target = urlsplit(url)

    async def pipe_client(reader, writer, server_writer):
        while True:  # the first message has no type byte; an SSL or GSS encryption request gets a "no"
            length, code = struct.unpack("!ii", await reader.readexactly(8))
            if code in (80877103, 80877104):
                writer.write(b"N")
                await writer.drain()
                continue
            server_writer.write(struct.pack("!ii", length, code) + await reader.readexactly(length - 8))
            break
        while data := await reader.read(65536):
            server_writer.write(data)
            await server_writer.drain()

    async def pipe_server(server_reader, writer):
        while True:
            kind, length = struct.unpack("!ci", await server_reader.readexactly(5))
            body = await server_reader.readexactly(length - 4)
            if not (drop and kind == b"A"):
                writer.write(kind + struct.pack("!i", length) + body)
                await writer.drain()

    async def handle(reader, writer):
        server_reader, server_writer = await asyncio.open_connection(target.hostname, target.port or 5432)
        tasks = [asyncio.create_task(pipe_client(reader, writer, server_writer)),
                 asyncio.create_task(pipe_server(server_reader, writer))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for w in (writer, server_writer):
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield url.replace(target.netloc, f"{target.username}@127.0.0.1:{port}" if target.username else f"127.0.0.1:{port}")
    finally:
        server.close()


async def test_a_listener_that_hears_no_notices_keeps_nothing(postgres_url, caplog):
    async with notice_dropping_proxy(postgres_url, drop=False) as url:  # the proxy itself passes what it should
        db = Database(Settings(_env_file=None, database_url=url))
        try:
            kept = db.kept(RUN_VERSIONS)
            await until(lambda: _true(kept.listening))
        finally:
            await db.close()

    caplog.set_level(logging.INFO, logger="app.kit.db")
    async with notice_dropping_proxy(postgres_url) as url:
        db = Database(Settings(_env_file=None, database_url=url))
        try:
            kept = db.kept(RUN_VERSIONS)
            await until(lambda: _true("did not arrive" in caplog.text), timeout=LISTEN_CHECK_S + 30)
            assert not kept.listening
            kept.keep_row(kept.token(), "run_a", ("public", "run_a", 1, 1, "running", None))
            assert kept.row("run_a") is None
        finally:
            await db.close()


async def test_an_announced_row_read_here_is_prepared_for_before_it_is_taken():
    kept = KeptReads()
    kept.listening = True
    kept.keep_row(kept.token(), "a", ("a", 1))
    kept.keep_query(kept.token(), ("page",), [("b", 1)])
    seen = []

    async def prepare(key: str, row: tuple) -> None:
        seen.append((key, row, kept.rows.get(key), [r for rows in kept.queries.values() for r in rows if r[0] == key]))
        if key == "b":
            raise RuntimeError("the database is away")

    kept.prepare = prepare
    await kept.announced(json.dumps({"key": "a", "row": ["a", 2], "moved": False}))
    await kept.announced(json.dumps({"key": "b", "row": ["b", 2], "moved": False}))  # listed on a kept page
    await kept.announced(json.dumps({"key": "c", "row": ["c", 2], "moved": False}))  # read nowhere here: no work
    assert seen == [("a", ("a", 2), ("a", 1), []), ("b", ("b", 2), None, [("b", 1)])]  # meanwhile reads get the old row
    assert kept.rows == {"a": ("a", 2)} and kept.queries == {("page",): [("b", 2)]}  # taken, a failure too
