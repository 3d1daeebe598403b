"""The embedded model server is a child process: kill -9 its parent and it exits too; it starts without ART."""

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


def test_the_model_server_imports_neither_art_nor_its_clients():
    """It serves and trains on JSON: ART, litellm and openai (seconds of CPU) would be imported at every start for
    nothing."""
    probe = "import sys, app.backends.embedded.server, app.backends.embedded.grpo; print(sorted({'art', 'litellm', 'openai', 'polars'} & set(sys.modules)))"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert found.strip() == "[]", found
