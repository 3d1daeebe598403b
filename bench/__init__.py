"""Benchmarks: `make bench` (or `python -m bench`) writes bench/RESULTS.md and bench/results.json."""

import os
import platform
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).parent


async def run_in_process(request, settings=None, *, details: bool = False) -> tuple[dict, list[dict]]:
    """One run through the service's own workflow (`app.lifecycle.local`, as `codreamer run`) on a throwaway database: the
    finished run and its iterations (with their trajectories when `details`). Imports the app only when called, so
    a benchmark process can set its environment first."""
    from app.kit.settings import Settings
    from app.lifecycle.local import local_service, run_to_end
    from app.runs import repository

    with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as data_dir:
        async with local_service(Path(data_dir), settings or Settings(_env_file=None)) as process:
            finished = await run_to_end(process, request)
            async with process.api.db.read() as session:
                records = await repository.iterations(process.api.db, finished["run_id"])
                if details:
                    records = [await repository.iteration_detail(session, finished["run_id"], r["iteration"]) for r in records]
    return finished, records


# What a benchmark writes itself: left out when asking whether the code measured is the commit's.
WRITTEN = ("bench/RESULTS.md", "bench/results.json", "bench/learning.png", "bench/outcomes.png")


def commit(root: Path = HERE.parent) -> str:
    """The commit measured, with "+changes" when tracked files other than the results differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout

    # each line is "XY path": the status's two columns (" M" for a change not staged), a space, the path
    changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()
               if line[3:] not in WRITTEN]
    return git("rev-parse", "--short=10", "HEAD").strip() + ("+changes" if changed else "")


def cpu_model() -> str:
    return next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                platform.processor() or "unknown")


def machine() -> dict:
    """Where, when and on what a section was measured: the commit, the machine, and the load as it began."""
    memory_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    return {"commit": commit(), "cores": os.cpu_count(), "cpu": cpu_model(), "memory_gib": round(memory_kb / 1024**2, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "load_average": [round(x, 2) for x in os.getloadavg()]}
