"""The embedded model server is a child process: kill -9 its parent and it exits too."""

import asyncio
import subprocess
import sys

from tests.support import process_gone, wait_until

ORPHAN = """
import asyncio, art
from app.backends.embedded import EmbeddedBackend

async def main():
    backend = EmbeddedBackend()
    await art.TrainableModel(name="orphan", project="p", base_model="embedded", report_metrics=[]).register(backend)
    print(await backend.server_pid(), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_the_model_server_exits_when_its_parent_is_killed(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], cwd=tmp_path, stdout=subprocess.PIPE)
    try:
        pid = int(await asyncio.to_thread(parent.stdout.readline))
        assert not process_gone(pid)
    finally:
        parent.kill()  # kill -9: no shutdown code of the parent runs
        parent.wait()
    await wait_until(lambda: process_gone(pid), timeout=15)
