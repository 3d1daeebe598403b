"""`python -m bench [section …]`: runs the benchmarks and writes bench/RESULTS.md and bench/results.json."""

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ["WEAVE_DISABLED"] = "true"

import app  # noqa: E402,F401  (sets litellm offline before anything imports it)
from bench import machine  # noqa: E402

HERE = Path(__file__).parent
SECTIONS = ("world", "weekly", "orchestration", "api", "learning", "scale", "outcomes", "reads", "interference",
            "scale_out", "pipelining", "real_model", "drafts", "promotion", "fairness")


def run(section: str, workdir: Path, previous=None):
    if section == "orchestration":
        from bench import orchestration

        return asyncio.run(orchestration.measure())
    if section == "api":
        from bench import api_load

        layouts = [("postgresql", True), ("postgresql", False), ("sqlite", False)]
        return [api_load.measure(workdir / f"api-{db}-{split}", db, split_worker=split) for db, split in layouts]
    if section == "learning":
        from bench import learning

        result = learning.measure()
        learning.plot(result, HERE / "learning.png")
        return result
    if section == "outcomes":
        from bench import outcomes

        return outcomes.measure(workdir / "outcomes")
    if section == "drafts":
        from bench import drafts

        return drafts.measure(workdir / "drafts", previous)
    if section == "promotion":
        from bench import promotion

        return promotion.measure(previous)
    if section == "fairness":
        from bench import fairness

        return fairness.measure(workdir / "fairness")
    if section == "world":
        from bench import world

        return world.measure()
    if section == "weekly":
        from bench import weekly

        return weekly.measure()
    if section == "real_model":
        from bench import real_model

        return real_model.measure()
    if section == "pipelining":
        from bench import pipelining

        return pipelining.measure()
    if section == "scale_out":
        from bench import scale_out

        return scale_out.measure(workdir / "scale_out")
    if section == "interference":
        from bench import api_interference

        return api_interference.measure(workdir / "interference")
    if section == "reads":
        from bench import read_cost

        return read_cost.measure(workdir / "reads")
    from bench import scale

    return scale.measure(workdir / "scale")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"any of {', '.join(SECTIONS)} (default: all but real_model, which "
                                                     "needs the model make bench-real-model builds)")
    sections = parser.parse_args().sections or [s for s in SECTIONS if s != "real_model"]
    if unknown := set(sections) - set(SECTIONS):
        parser.error(f"unknown sections: {sorted(unknown)}")
    path = HERE / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results["machine"] = machine()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for sub in ("api-postgresql-True", "api-postgresql-False", "api-sqlite-False", "scale", "outcomes"):
            (workdir / sub).mkdir()
        for section in sections:
            print(f"== {section}", flush=True)
            results.setdefault("machines", {})[section] = machine()  # when and where this section was measured
            results[section] = run(section, workdir, results.get(section))
            path.write_text(json.dumps(results, indent=2))
    from bench.report import write

    write(results, HERE / "RESULTS.md")
    print(f"wrote {HERE / 'RESULTS.md'}")


main()
