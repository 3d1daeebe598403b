"""Real processes for the service and end-to-end tests: `codreamer serve` and `worker`, databases, a TCP
proxy that can go down, and the helpers that wait on them (the stand-in servers are in standins.py)."""

import asyncio
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

POSTGRES_ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`codreamer serve` in a subprocess, reached over real HTTP."""

    command = "serve"

    def __init__(self, workdir: Path, env: dict[str, str], api_key: str | None = None):
        self.workdir, self.api_key = workdir, api_key
        # ART_PATH: the test process's own (conftest.py); a server keeps ART's folders in its working folder's .art
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("WANDB", "OPENAI", "JUDGE", "WEAVE", "API_KEYS", "ART_PATH"))}
        # one SECRET_KEY for every process of a test (an API and its workers must share it)
        self.env |= {"TQDM_DISABLE": "1", "MAX_CONCURRENT_RUNS": "4", "SECRET_KEY": "test-secret-key-of-the-servers"} | env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = workdir / f"serve-{self.port}.log"

    def start(self, timeout: float = 90, *, wait: bool = True) -> "Server":
        """Starts the process and, with `wait`, waits until it is ready (a server meant to crash during its start-up,
        in a fault drill, may never be)."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", self.command, *(["--port", str(self.port)] if self.command == "serve" else [])],
            cwd=self.workdir, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            # A session of its own, as from its own terminal: Linux shares the CPU fairly between sessions, so the
            # niced run worker competes with the test runner's other busy processes as a whole, not one by one.
            start_new_session=True,
        )
        if not wait:
            return self
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
            if self.ready():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"server not ready:\n{self.log.read_text()[-3000:]}")

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """kill -9: no shutdown code runs."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, **kwargs) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)


class WorkerProcess(Server):
    """`codreamer worker` in a subprocess: no HTTP; ready once it says it is running."""

    command = "worker"

    def ready(self) -> bool:
        return "running" in self.log.read_text(errors="replace")


class TcpProxy:
    """A TCP forwarder on loopback that can be taken down and brought back: a database outage on demand."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.port = free_port()
        self._connections: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def down(self) -> None:
        """Refuses new connections and cuts the open ones."""
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone would not)
        except OSError:
            pass
        self._listener.close()
        for conn in self._connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self._connections.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._connections += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def wait_for(predicate, timeout: float = 120, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def wait_for_status(client: httpx.Client, run_id: str, statuses=("succeeded", "failed", "cancelled"), timeout=180) -> dict:
    return wait_for(lambda: (run := client.get(f"/runs/{run_id}").json())["status"] in statuses and run, timeout)


def postgres_available() -> str | None:
    """None when PostgreSQL answers, else why not. On CI it must answer (`.ci/run` starts it)."""
    try:
        with psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL not reachable at {POSTGRES_ADMIN_URL} ({exc.__class__.__name__}); set TEST_POSTGRES_URL"


def skip_unless_ci(reason: str, on_ci: str) -> None:
    """Skips here with the reason; on CI (`CI` set, as `CI=true`) fails instead: there it must run."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: {on_ci}")
    pytest.skip(reason)


def require_postgres() -> None:
    reason = postgres_available()
    if reason is not None:
        skip_unless_ci(reason, "on CI the PostgreSQL tests must run")


class FreshPostgresDatabase:
    def __init__(self):
        self.name = f"codreamer_test_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
        self.url = f"{base}/{self.name}"

    def drop(self) -> None:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def postgres_bindir() -> Path | None:
    """Where PostgreSQL's server programs are (Debian keeps them out of PATH): the newest version's folder."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(path.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivateCluster:
    """A PostgreSQL cluster of a test's own, to restart or stop at will: `initdb` into a temporary folder, served on a
    free port of its own (and a socket in that folder), so no shared database is ever disturbed. initdb and the server
    refuse to run as root: as root, they run as the `postgres` user, which owns the folder."""

    def __init__(self):
        bindir = postgres_bindir()
        if bindir is None:
            skip_unless_ci("PostgreSQL's server programs (initdb, pg_ctl) are not installed",
                           "on CI the restart drill must run; install the postgresql package")
        self.as_owner: list[str] = []
        self.folder = Path(tempfile.mkdtemp(prefix="codreamer-pg-"))
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.folder)
                skip_unless_ci("running as root with no `postgres` user to own a private cluster",
                               "on CI the restart drill must run; the postgresql package creates that user")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self.as_owner = ["runuser", "-u", "postgres", "--"]
        self.pg_ctl_path = bindir / "pg_ctl"
        self.data, self.log = self.folder / "data", self.folder / "server.log"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._run(bindir / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        self.start()

    def start(self) -> None:
        self.pg_ctl("-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self) -> None:
        """An operator's fast stop: open sessions are cut, and nothing answers on the port until `start`."""
        self.pg_ctl("-m", "fast", "stop")

    def _run(self, *command) -> None:
        # the server's output goes to its log (-l), never to a pipe of ours that it would keep open
        result = subprocess.run([*self.as_owner, *map(str, command)], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {result.stdout}{result.stderr}\n{self.server_log()}")

    def pg_ctl(self, *args) -> None:
        self._run(self.pg_ctl_path, "-D", self.data, "-l", self.log, "-w", "-t", "60", *args)

    def restart(self) -> None:
        """A fast restart, as an operator's: open sessions are cut, the server comes back with the same options."""
        self.pg_ctl("-m", "fast", "restart")

    def server_log(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def remove(self) -> None:
        try:
            self.pg_ctl("-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def postmaster_started_at(url: str = POSTGRES_ADMIN_URL):
    """When the PostgreSQL server at `url` started (a restart changes it), or None when none answers there."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            return conn.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
    except psycopg.Error:
        return None


def events(client: httpx.Client, run_id: str) -> list[dict]:
    return client.get(f"/runs/{run_id}/events", params={"limit": 1000}).json()["data"]


def parse(request: dict) -> dict:
    return json.loads(request["body"])


@asynccontextmanager
async def lifespan(app):
    """Runs the app's lifespan through its whole middleware stack, as a server does."""
    inbox, outbox = asyncio.Queue(), asyncio.Queue()
    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put))

    async def step(message: str) -> None:
        await inbox.put({"type": f"lifespan.{message}"})
        answer = asyncio.ensure_future(outbox.get())
        await asyncio.wait({task, answer}, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            answer.cancel()
            task.result()  # the app raised before it could answer
        assert answer.result()["type"] == f"lifespan.{message}.complete", answer.result()

    await step("startup")
    try:
        yield
    finally:
        await step("shutdown")
        await task


async def chunked(data: bytes, size: int = 512):
    """A request body sent in chunks, without a Content-Length."""
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def sse_until(app, path: str, headers: dict[str, str], n: int, timeout: float = 30) -> list[tuple[str, str, dict]]:
    """The first `n` events (id, event, data) of a live stream that need not end (a graph's), read straight from the
    ASGI app, which then sees the client leave (httpx's ASGI transport waits for a response's end)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("test", 80), "headers": [(b"host", b"test"), (b"accept", b"text/event-stream"),
                                                 *((k.lower().encode(), v.encode()) for k, v in headers.items())]}
    left, asked, body = asyncio.Event(), False, ""

    async def receive() -> dict:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        nonlocal body
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
        elif message["type"] == "http.response.body":
            body += message.get("body", b"").decode()
            if body.count("\nid: ") + body.startswith("id: ") >= n:
                left.set()

    task = asyncio.create_task(app(scope, receive, send))
    try:
        await asyncio.wait_for(left.wait(), timeout)
        await asyncio.wait_for(task, timeout)
    finally:
        task.cancel()
    found = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "data" in fields:
            found.append((fields["id"], fields["event"], json.loads(fields["data"])))
    return found[:n]


def connect(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def assert_exactly_once(client: httpx.Client, run_id: str, iterations: int) -> None:
    """The run succeeded with iterations 0..n, each recorded, trained and announced exactly once."""
    run = client.get(f"/runs/{run_id}").json()
    assert run["status"] == "succeeded", run
    recorded = client.get(f"/runs/{run_id}/iterations").json()["data"]
    assert [i["iteration"] for i in recorded] == list(range(iterations + 1))
    step = 0  # one step per iteration that trained; an iteration with no reward variance trains none
    for record in recorded[1:]:
        training = record["training"]
        step += 0 if training["skipped"] else 1
        assert training["step"] == step, [(i["iteration"], i["training"]) for i in recorded[1:]]
    assert step > 0
    completed = [e["data"]["iteration"] for e in events(client, run_id) if e["type"] == "iteration.completed"]
    assert completed == list(range(iterations + 1))


def process_gone(pid: int) -> bool:
    """No such process, or a zombie nobody has reaped yet: either way it no longer runs."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def child_pids(pid: int) -> list[int]:
    """The pids of `pid`'s children, whichever of its threads started them."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:
            pass  # a thread that ended since the listing
    return children


def run_workers(parent: int) -> list[int]:
    """The pids of `parent`'s run-worker children (`python -m app worker --child`)."""
    found = []
    for child in child_pids(parent):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if command[1:4] == [b"-m", b"app", b"worker"] and not process_gone(child):
            found.append(child)
    return found


async def wait_until(predicate, timeout: float = 30) -> None:
    """`wait_for` for async tests: polls a plain predicate without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


TENANT_KEYS = "alice:alice-key,bob:bob-key"


@asynccontextmanager
async def two_tenants(database: str, tmp_dir: Path, **settings):
    """Alice and Bob (`alice-key`, `bob-key`) on one app in process with its worker, on a fresh SQLite file in
    `tmp_dir` or, `database` being "postgresql", a fresh PostgreSQL database, dropped afterwards; yields (app, alice,
    bob). `settings` add to the test settings."""
    from app.kit.settings import Settings
    from app.main import create_app

    postgres = None
    if database == "postgresql":
        require_postgres()
        postgres = FreshPostgresDatabase()
    url = postgres.url if postgres else f"sqlite:///{tmp_dir}/db.sqlite"
    app = create_app(Settings(_env_file=None, database_url=url, environment="test", api_keys=TENANT_KEYS, **settings))
    try:
        async with lifespan(app), connect(app) as alice, connect(app) as bob:
            alice.headers["Authorization"], bob.headers["Authorization"] = "Bearer alice-key", "Bearer bob-key"
            yield app, alice, bob
    finally:
        if postgres:
            postgres.drop()


async def learned(client: httpx.AsyncClient, body: dict) -> str:
    """The id of a run of `body` (a POST /learn-loop body), once it has succeeded."""
    run_id = (await client.post("/learn-loop", json=body)).json()["run_id"]
    run = await finished(client, run_id, timeout=300)
    assert run["status"] == "succeeded", run
    return run_id


async def settled(client: httpx.AsyncClient, path: str, timeout: float = 300) -> dict:
    """The resource at `path` (a draft batch, an evaluation) once its status is final."""
    for _ in range(int(timeout / 0.1)):
        found = (await client.get(path)).json()
        if found["status"] in ("succeeded", "failed", "cancelled"):
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} did not end: {found}")


async def finished(client: httpx.AsyncClient, run_id: str, timeout: float = 120) -> dict:
    """The run once it is succeeded, failed or cancelled (in-process clients)."""
    for _ in range(int(timeout / 0.1)):
        run = (await client.get(f"/runs/{run_id}")).json()
        if run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish: {run}")
