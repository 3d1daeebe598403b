"""Benchmarks: `make bench` (or `python -m bench`) writes bench/RESULTS.md and bench/results.json."""

import tempfile
from pathlib import Path


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
