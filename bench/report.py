"""Renders bench/results.json as bench/RESULTS.md, each number against its target.

Each benchmark is one section, opened by a `<!-- section: NAME -->` line (docs/hooks.py makes a page of each) and a
line saying where it was measured: the commit, the date, the machine and the load as it began. A benchmark with no
figures for the current code says so instead of showing old ones."""

import json
import math
import re
from pathlib import Path

from app.stats.intervals import sends_to_decide

# Each benchmark's section: its title, and the command that measures it.
TITLES = {
    "world": "Learning in the simulated world: the demo, transfer to unseen industries, the judge",
    "weekly": "The weekly loop at a team's volume",
    "orchestration": "Orchestration efficiency",
    "api": "API under load",
    "learning": "Learning: GRPO, graph reweighting and in-context learning side by side",
    "scale": "Scale",
    "outcomes": "Outcomes: ingestion",
    "reads": "CPU per read",
    "interference": "API interference (default `serve`: the API, its run worker in a child process)",
    "scale_out": "Scale-out across worker processes",
    "pipelining": "Pipelined iterations",
    "real_model": "A real small model as policy and judge",
    "drafts": "Drafts: throughput and scale-out",
    "promotion": "Promotion on evidence: off-policy accuracy and regret",
    "fairness": "Fair queues and a database outage",
    "reply_interest": "Learning from what replies meant",
}
COMMANDS = {key: f"python -m bench {key}" for key in TITLES} | {"real_model": "make bench-real-model",
                                                                  "reply_interest": "python -m bench.reply_interest"}
# Benchmarks that write their own section of RESULTS.md (`write_own_section`); rendering keeps it as they wrote it.
OWN_SECTIONS = {"replies": "python -m bench.replies", "writing": "python -m bench.writing"}
MARKER = "<!-- section: {} -->"
ANY_MARKER = re.compile(r"^<!-- section: (\S+) -->$", re.M)
HEADING = re.compile(r"^## (.+)$")


def _ok(passed: bool) -> str:
    return "met" if passed else "**missed**"


def provenance(where: dict | None) -> str:
    """Where and when a section was measured: the commit, date, machine and load, as `python -m bench` records them
    (sections measured before it did carry the commit that recorded their figures)."""
    if not where:
        return "*Where and when: not recorded.*"
    load = where.get("load_average")
    minutes = "1/5/15 min" if load and len(load) == 3 else "1 min"  # some benchmarks recorded the 1-minute figure only
    load_text = (f"load average {'/'.join(f'{x:.1f}' for x in load)} ({minutes}) as it {where.get('load_at', 'began')}"
                 if load else "load as it began not recorded")
    cpu = f" ({where['cpu']})" if where.get("cpu") else ""
    if where.get("recorded_in_commit"):
        code = (f"the code of commit `{where['commit']}`'s parent, with that commit's changes (the commit that recorded "
                "these figures)")
    else:
        code = f"commit `{where['commit']}`"
    return f"*Measured {where['date']} on {code}; {where['cores']} cores{cpu}, {where['memory_gib']} GiB; {load_text}.*"


def write(results: dict, path: Path) -> None:
    path.write_text(render(results, path.parent))


def own_sections(text: str) -> list[str]:
    """The sections of a RESULTS.md whose marker names a benchmark that writes its own (not in TITLES), each from its
    marker to the next marker or the end."""
    pieces = ANY_MARKER.split(text)
    return [f"{MARKER.format(name)}\n{body.strip(chr(10))}\n" for name, body in zip(pieces[1::2], pieces[2::2])
            if name not in TITLES]


def write_own_section(path: Path, name: str, body: str) -> None:
    """Puts `body` (the section's heading onwards) under `name`'s marker in RESULTS.md at `path`, replacing what was
    there from that marker to the next, or appending it; the other sections stay as they are."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    section = f"{MARKER.format(name)}\n{body.strip(chr(10))}\n"
    pieces = ANY_MARKER.split(text)
    names = pieces[1::2]
    if name in names:
        last = len(names) - 1
        text = pieces[0] + "".join(
            section + ("\n" if at < last else "") if other == name else MARKER.format(other) + body
            for at, (other, body) in enumerate(zip(names, pieces[2::2])))
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def _with_reply_interest(results: dict, here: Path) -> dict:
    """The figures bench/reply_interest.py records in bench/reply_interest.json, with where it measured them."""
    path = here / "reply_interest.json"
    if not path.exists():
        return results
    recorded = json.loads(path.read_text())
    return results | {"reply_interest": recorded,
                      "machines": results.get("machines", {}) | {"reply_interest": recorded["where"]}}


def render(results: dict, here: Path) -> str:
    """RESULTS.md for `results` (`here`: the folder of bench/reads_before.json and bench/reply_interest.json), with
    the sections benchmarks wrote themselves kept from the RESULTS.md there."""
    results = _with_reply_interest(results, here)
    machines = results.get("machines", {})
    lines = [
        "# Benchmark results",
        "",
        "`make bench` regenerates every section on the current commit; `.venv/bin/python -m bench NAME` one of them.",
        "Each section says the commit, date, machine and load it was measured on. Raw numbers: `bench/results.json`.",
        "",
        "| benchmark | command | measured | commit | load average as it began |",
        "|---|---|---|---|---|",
        *[f"| {TITLES[key]} | `{COMMANDS[key]}` | "
          + (f"{machines[key]['date'][:10]} | `{machines[key]['commit']}` | "
             + ("/".join(f"{x:.1f}" for x in machines[key]["load_average"]) if machines[key].get("load_average")
                else "not recorded") + " |"
             if key in results and key in machines else "not on the current code | — | — |")
          for key in TITLES],
        "",
    ]
    lines += sections(results, here)
    kept = own_sections((here / "RESULTS.md").read_text()) if (here / "RESULTS.md").exists() else []
    return "\n".join(_marked(lines, results) + kept)


def _marked(lines: list[str], results: dict) -> list[str]:
    """Each section's heading preceded by its marker and followed by where it was measured; a benchmark with no
    figures gets a section that says so."""
    by_title = {title: key for key, title in TITLES.items()}
    out, seen = [], set()
    for line in lines:
        match = HEADING.match(line)
        key = by_title.get(match.group(1)) if match else None
        if key is None:
            out.append(line)
            continue
        seen.add(key)
        out += [MARKER.format(key), line, "", provenance(results.get("machines", {}).get(key))]
    for key in TITLES:
        if key not in seen:
            out += [MARKER.format(key), f"## {TITLES[key]}", "",
                    f"No figures measured on the current code: `{COMMANDS[key]}` measures them.", ""]
    return out


def sections(results: dict, here: Path) -> list[str]:
    lines: list[str] = []
    if wd := results.get("world"):
        lines += world_section(wd)
    if wk := results.get("weekly"):
        lines += weekly_section(wk)
    if o := results.get("orchestration"):
        lines += [
            f"## {TITLES['orchestration']}",
            "",
            f"S={o['scenarios']} scenarios × K={o['rollouts_per_group']} rollouts × T={o['turns']} turns, concurrency "
            f"{o['concurrency']}; every model call takes {o['latency_model_s']} s, every judge call {o['latency_judge_s']} s, "
            f"training {o['training_s']} s (a latency-injected OpenAI-compatible server on loopback).",
            "",
            "| | seconds | vs bound |",
            "|---|---|---|",
            f"| critical-path bound | {o['bound_s']:.2f} | 1.00 |",
            f"| ours (each group judged as it completes) | {o['ours_s']:.2f} | {o['ratio_to_bound']:.2f} |",
            f"| seed shape (generate all, judge one group after another, train) | {o['seed_shape_s']:.2f} | {o['seed_shape_s'] / o['bound_s']:.2f} |",
            "",
            f"- Ratio to the bound {o['ratio_to_bound']:.2f} (target ≤ 1.15): {_ok(o['ratio_to_bound'] <= 1.15)}.",
            f"- {o['speedup_over_seed']:.1f}× faster than the seed shape (target ≥ 2×): {_ok(o['speedup_over_seed'] >= 2)}.",
            "- The remaining gap is CPU on this 2-core machine: litellm and the OpenAI client per call, and the",
            "  embedded judge's and policy's own work, all in one Python process. A rollout's requests pass the",
            "  conversation by `extra_body`: the OpenAI SDK's walk of typed messages cost 0.6 ms of CPU per message",
            "  (this benchmark: 8.5–9.0 s before, 1.22–1.28× the bound, on the same machine the same day).",
            "",
        ]
    if api := results.get("api"):
        lines += api_section(api)
    if lr := results.get("learning"):
        lines += learning_section(lr)
    if sc := results.get("scale"):
        lines += [
            f"## {TITLES['scale']}",
            "",
            "Synthetic graphs (random vocabulary, about 3 edges per node, 4 scenarios), PostgreSQL, K=4,",
            "3 iterations each. The database growth is the size of the run tables after the run minus before, per",
            "iteration.",
            "",
            "| nodes | iteration s | reweight ms | publish + step overhead ms | nodes changed / iteration | DB growth / iteration KiB |",
            "|---|---|---|---|---|---|",
        ]
        for r in sc:
            lines.append(f"| {r['nodes']:,} | {r['iteration_s']:.2f} | {r['reweight_ms']:.1f} | {r['publish_and_overhead_ms']:.0f} | "
                         f"{r['nodes_changed_per_iteration']:.1f} | {r['db_growth_per_iteration_kb']:.0f} |")
        small, large = sc[0], sc[-1]
        flat = large["publish_and_overhead_ms"] < 3 * small["publish_and_overhead_ms"] and large["db_growth_per_iteration_kb"] < 3 * small["db_growth_per_iteration_kb"]
        lines += [
            "",
            f"- Target: cost grows with the nodes touched, not with the graph's size. This is {_ok(flat)}: from "
            f"{small['nodes']:,} to {large['nodes']:,} nodes, the publish and step overhead per iteration goes from "
            f"{small['publish_and_overhead_ms']:.0f} to {large['publish_and_overhead_ms']:.0f} ms and the database growth "
            f"from {small['db_growth_per_iteration_kb']:.0f} to {large['db_growth_per_iteration_kb']:.0f} KiB (the target: "
            f"each less than 3×); an iteration takes {small['iteration_s']:.2f} s and {large['iteration_s']:.2f} s.",
            "- How it is kept small: a run stores scores only for nodes that moved, and each iteration stores only its",
            "  changes.",
            "  Steps read scores as a `NodeScores` mapping whose missing nodes are 1.0, so nothing copies the graph.",
            "  Webhooks carry at most the top 500 plus the changed nodes above 2,000 nodes.",
            "- What still grows with the graph: the first load of a graph into a process's cache, and",
            "  `GET /runs/{id}/node-scores`, which returns every node as the contract asks.",
            "",
        ]
    if oc := results.get("outcomes"):
        lines += outcomes_section(oc, results.get("machines", {}).get("outcomes"))
    if rd := results.get("reads"):
        before = here / "reads_before.json"
        lines += reads_section(rd, json.loads(before.read_text()) if before.exists() else None)
    if inter := results.get("interference"):
        lines += interference_section(inter)
    if so := results.get("scale_out"):
        lines += scale_out_section(so)
    if pl := results.get("pipelining"):
        lines += pipelining_section(pl)
    if rm := results.get("real_model"):
        lines += real_model_section(rm)
    if dr := results.get("drafts"):
        lines += drafts_section(dr)
    if fa := results.get("fairness"):
        lines += fairness_section(fa)
    if ri := results.get("reply_interest"):
        lines += reply_interest_section(ri)
    if pr := results.get("promotion"):
        lines += promotion_section(pr)
    return lines


def learning_section(lr: dict) -> list[str]:
    if "graphs" not in lr:  # results from before the side-by-side benchmark
        return []
    n = lr["iterations"]
    late = lr["late_iterations"]
    late_label = f"{late[0]}–{late[-1]}"
    demo, synthetic = lr["graphs"]["demo"], lr["graphs"]["synthetic"]
    lines = [
        f"## {TITLES['learning']}",
        "",
        "Each variant runs through the service's own workflow (`app.lifecycle.local`, as `codreamer run` does), K=4 rollouts per",
        f"scenario, {n} iterations, seeds {lr['seeds']}; the curves are the mean reward per iteration, averaged over seeds.",
        "Variants: **full** (GRPO + KG reweighting), **GRPO only**, **KG only** (no GRPO), **neither**, and **in context**",
        "(no GRPO; KG reweighting plus the distilled exemplar and playbook in the prompts, as a fixed hosted model learns).",
        f"Graphs: the **demo** (10 scenarios; the judge blended with the world's oracle) and **{lr['synthetic_graph']}**, a",
        "generated graph of random words (4 scenarios; the judge alone). Constants were set by reasoning (docs/architecture/learning.md,",
        "KG reweighting), not tuned on these numbers.",
        "",
        f"| graph | variant | iteration 1 | iteration 10 | iteration {n} | mean {late_label} |",
        "|---|---|---|---|---|---|",
    ]
    for graph, entry in (("demo", demo), (lr["synthetic_graph"], synthetic)):
        for variant, curve in entry["curves"].items():
            lines.append(f"| {graph} | {variant.replace('_', ' ')} | {curve[0]:.3f} | {curve[min(9, n - 1)]:.3f} | {curve[-1]:.3f} | "
                         f"{entry['late_mean'][variant]:.3f} |")
    lm_demo, lm_syn = demo["late_mean"], synthetic["late_mean"]
    c_demo = demo["curves"]
    kg_gain = {g: e["late_mean"]["kg_only"] - e["late_mean"]["neither"] for g, e in (("demo", demo), ("synthetic", synthetic))}
    full_vs_grpo = {g: e["late_mean"]["full"] - e["late_mean"]["grpo_only"] for g, e in (("demo", demo), ("synthetic", synthetic))}
    in_context_ratio = c_demo["in_context"][min(9, n - 1)] / c_demo["in_context"][0]
    cite_nothing = {g: e["cite_nothing_iteration_1"] for g, e in (("demo", demo), ("synthetic", synthetic))}
    lines += [
        "",
        "Targets (issue 10), each from the table above:",
        "",
        f"- KG only ≥ neither + 0.05 (mean of iterations {late_label}): demo {lm_demo['kg_only']:.3f} vs {lm_demo['neither']:.3f} "
        f"(+{kg_gain['demo']:.3f}), {_ok(kg_gain['demo'] >= 0.05)}; synthetic {lm_syn['kg_only']:.3f} vs {lm_syn['neither']:.3f} "
        f"(+{kg_gain['synthetic']:.3f}), {_ok(kg_gain['synthetic'] >= 0.05)}.",
        f"- Full ≥ GRPO only (mean of iterations {late_label}): demo {lm_demo['full']:.3f} vs {lm_demo['grpo_only']:.3f}, "
        f"{_ok(full_vs_grpo['demo'] >= 0)}; synthetic {lm_syn['full']:.3f} vs {lm_syn['grpo_only']:.3f}, {_ok(full_vs_grpo['synthetic'] >= 0)}.",
        f"- Untrained emails that cite nothing < 20% (all iteration-1 rollouts, every variant and seed): demo "
        f"{cite_nothing['demo']:.1%}, {_ok(cite_nothing['demo'] < 0.2)}; synthetic {cite_nothing['synthetic']:.1%}, "
        f"{_ok(cite_nothing['synthetic'] < 0.2)}.",
        f"- In context ≥ 1.1× its iteration-1 reward by iteration 10 (demo): {c_demo['in_context'][0]:.3f} → "
        f"{c_demo['in_context'][min(9, n - 1)]:.3f}, {in_context_ratio:.2f}×, {_ok(in_context_ratio >= 1.1)}.",
        "",
        "Per seed, mean of the late iterations:",
        "",
        "| graph | " + " | ".join(v.replace("_", " ") for v in demo["curves"]) + " |",
        "|---|" + "---|" * len(demo["curves"]),
    ]
    for graph, entry in (("demo", demo), ("synthetic", synthetic)):
        lines.append(f"| {graph} | " + " | ".join(", ".join(f"{x:.3f}" for x in entry["late_mean_per_seed"][v]) for v in entry["curves"]) + " |")
    lines += [
        "",
        "Mean judge score of the published emails (iterations 0–" + str(n) + "): "
        + "; ".join(f"{v.replace('_', ' ')} {x:.3f}" for v, x in demo["published_score_mean"].items()) + " (demo).",
        "",
        "![reward curves](learning.png)",
        "",
    ]
    return lines


def outcomes_section(oc: dict, machine: dict | None = None) -> list[str]:
    ing = oc["ingestion"]
    return [
        f"## {TITLES['outcomes']}",
        "",
        f"Ingestion: {ing['events']:,} SendGrid events in signed batches of {ing['batch']:,}, all at once, into PostgreSQL "
        f"through a live server: {ing['seconds']} s, **{ing['events_per_s']:,} events/s** "
        f"({_ok(ing['events_per_s'] >= 2000)} ≥ 2,000), {ing['accepted']:,} accepted. The same batches replayed "
        f"{ing['replayed'] // ing['events']}× concurrently: {ing['replay_accepted']} accepted, {ing['replay_duplicates']:,} "
        f"duplicates ({_ok(ing['replay_accepted'] == 0 and ing['replay_duplicates'] == ing['replayed'])}).",
        "",
    ]


READ_TARGET_MS = 1.0


def reads_section(after: dict, before: dict | None) -> list[str]:
    """CPU per read; `before` is the same measurement of the commit before conditional reads (bench/reads_before.json)."""
    old = (before or {}).get("reads", {})
    lines = [
        f"## {TITLES['reads']}",
        "",
        f"API process CPU (user + system, its own clock) per request, {after['requests_each']:,} sequential requests each "
        "on one keep-alive connection, `codreamer serve` on SQLite, idle but for the benchmark. Before: the commit "
        "before conditional reads (`bench/reads_before.json`, same script). A `304` sends the previous answer's `ETag`.",
        "",
        "| read | CPU ms before | CPU ms now | wall ms now | bytes |",
        "|---|---|---|---|---|",
    ]
    for name, cost in after["reads"].items():
        was = old.get(name, {}).get("cpu_ms")
        lines.append(f"| {name} | {'–' if was is None else f'{was:.2f}'} | {cost['cpu_ms']:.2f} | {cost['wall_ms']:.2f} | "
                     f"{cost['bytes']:,} |")
    met = {name: cost["cpu_ms"] <= READ_TARGET_MS for name, cost in after["reads"].items()
           if name in ("run view", "run list page (20)", "iteration list (6)")}
    lines += [
        "",
        f"- Target ≤ {READ_TARGET_MS:g} ms for a run view, a run list page and an iteration list: "
        + "; ".join(f"{name} {_ok(ok)}" for name, ok in met.items()) + ".",
        f"- The floor: `GET /healthz` (no database) costs {after['floor_healthz']['cpu_ms']:.2f} ms through the same "
        "server and middleware. Each read first glances at the run's version (on SQLite a plain sqlite3 read in the "
        "event loop's thread, no session), then sends the answer rendered for that version; the first read of a new "
        "version renders it through a session, as before conditional reads (about 2–5 ms once per version).",
        "",
    ]
    return lines


INTERFERENCE_RATIO = 2.0
QUIET_P99_MS = 50.0


def interference_section(results: list[dict]) -> list[str]:
    lines = [
        f"## {TITLES['interference']}",
        "",
        "The request mix of section 2 at each rate, first with 20 runs in flight on the embedded backend, then on the",
        "same data once every run has stopped. Each figure pools three 15 s stretches, the rates taking turns; each",
        "stretch's own p99 is listed too. Each stretch follows a lead-in second at its rate, not recorded, which",
        "opens the client's connections. Cores: CPU seconds per second of the API's process, its worker, the",
        "worker's embedded model server and PostgreSQL (its postmaster's whole tree: backends that start or end during",
        "a stretch count too). Waited: milliseconds a second that the API's event loop, and the load client's, were",
        "runnable but waited for a core (Linux's `/proc/<pid>/schedstat`; a request's latency includes both), lead-in",
        "second included. A ratio moves with its denominator: where every",
        "request costs more CPU (a slower machine), the p99 without runs rises and the ratio falls, so compare the",
        "p99s with runs too.",
        "",
        "| database | req/s | runs | achieved req/s | p50 ms | p99 ms | p99 ms: run / runs page / iterations | p99 ms of each stretch | errors | cores: API / worker / model server / database | waited ms/s: API / client |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for label, key in (("20 in flight", "with_runs"), ("none", "without_runs")):
            for rate, m in r[key].items():
                c, by_read = m["cores"], m.get("p99_ms_by_read")
                reads = " / ".join(f"{by_read[k]:.1f}" for k in ("run", "runs_page", "iterations")) if by_read else "–"
                stretches = " / ".join(f"{v:.1f}" for v in m["stretch_p99_ms"])
                lines.append(f"| {r['database']} | {rate} | {label} | {m['throughput_rps']:.0f} | {m['p50_ms']:.1f} | "
                             f"{m['p99_ms']:.1f} | {reads} | {stretches} | {m['errors']} | "
                             f"{c['api']:.2f} / {c['worker']:.2f} / {c['model_server']:.2f} / "
                             + (f"{c['database']:.2f} |" if "database" in c else "– |")
                             + (f" {w['api']:.1f} / {w['client']:.1f} |" if (w := m.get("waited_for_a_core_ms_per_s")) else " – |"))
    lines.append("")
    for r in results:
        ratio, quiet = r["ratio"].get("200"), max(m["p99_ms"] for m in r["without_runs"].values())
        lines.append(f"- {r['database']}: p99 with runs ÷ without, " + ", ".join(f"{v:.1f}× at {k}/s" for k, v in r["ratio"].items())
                     + f" (target ≤ {INTERFERENCE_RATIO:g}× at 200/s: {_ok(ratio is not None and ratio <= INTERFERENCE_RATIO)}); "
                     f"p99 without runs up to {quiet:.1f} ms (target < {QUIET_P99_MS:g} ms: {_ok(quiet < QUIET_P99_MS)})"
                     + (f"; the runs meanwhile: {p['iterations_per_min']:.0f} iterations a minute, {p['worker_cpu_s_per_iteration']:.2f} s "
                        "of the worker's CPU each." if (p := r.get("runs_progress")) else "."))
    lines.append("")
    return lines


SCALE_OUT_TARGET = 1.8


def scale_out_section(so: dict) -> list[str]:
    lat = so["latencies"]
    lines = [
        f"## {TITLES['scale_out']}",
        "",
        f"{so['results'][0]['runs']} runs of 2 iterations (K = 4, 4 turns, one scenario) on one PostgreSQL database, "
        f"API-only `serve` plus 1, 2 and 4 `codreamer worker` processes, each taking {so['per_worker']} runs at once. "
        f"The policy (a fixed model: no training step) and a RULER judge are a latency-injected OpenAI-compatible "
        f"server on loopback ({lat['model_s']} s a model call, {lat['judge_s']} s a judge call), so the runs wait on I/O, "
        "not on this machine's 2 cores.",
        "",
        "| workers | runs succeeded | seconds | runs per minute | vs 1 worker |",
        "|---|---|---|---|---|",
    ]
    for r in so["results"]:
        lines.append(f"| {r['workers']} | {r['succeeded']} / {r['runs']} | {r['seconds']:.1f} | {r['runs_per_minute']:.2f} | "
                     f"{so['speedup'].get(str(r['workers']), so['speedup'].get(r['workers'], 0)):.2f}× |")
    two = so["speedup"].get("2", so["speedup"].get(2, 0))
    lines += ["", f"- Target ≥ {SCALE_OUT_TARGET:g}× at 2 workers: {two:.2f}×, {_ok(two >= SCALE_OUT_TARGET)}.", ""]
    return lines


PIPELINING_TARGET = 1.5  # iterations per hour at max_steps_off_policy 1 ÷ strict order
PIPELINING_LEARNING_TOLERANCE = 0.02


def pipelining_section(pl: dict) -> list[str]:
    lat, run, lr = pl["latencies"], pl["run"], pl["learning"]
    lines = [
        f"## {TITLES['pipelining']}",
        "",
        f"One run of {run['iterations']} iterations (K = {run['rollouts_per_group']}, {run['max_turns']} turns, one scenario, "
        f"judge only) per setting, through `app.lifecycle.local`, on the embedded backend with latencies injected into its model "
        f"server (`LATENCY_AT`: {lat['model']} s a policy turn, {lat['judge']} s a judge call, {lat['train']} s a GRPO step, "
        "during which it keeps serving), one run at a time. Rate: iterations 1..N over the time from the baseline's "
        "record to the last.",
        "",
        "| max_steps_off_policy | seconds | iterations per hour | vs strict | steps off policy per iteration |",
        "|---|---|---|---|---|",
    ]
    for t in pl["throughput"]:
        lines.append(f"| {t['max_steps_off_policy']} | {t['seconds']:.1f} | {t['iterations_per_hour']:.0f} | "
                     f"{pl['speedup'][str(t['max_steps_off_policy'])]:.2f}× | {', '.join(f'{x:g}' for x in t['steps_off_policy'])} |")
    one = pl["speedup"]["1"]
    diff = lr["difference"]
    lines += [
        "",
        "At 2 the run first generates two iterations in order before any overlap, and a stage still waits for its "
        "slowest side (train, then email and publish), so it gains nothing over 1 here: one trainer and one generator "
        "overlap fully at 1.",
        "",
        f"Learning: the demo's `full` variant (GRPO + KG reweighting), {len(lr['seeds'])} seeds × {lr['iterations']} "
        "iterations, embedded backend without injected latency; mean reward of iterations 16–20:",
        "",
        "| max_steps_off_policy | mean reward | per seed |",
        "|---|---|---|",
    ]
    for s in ("0", "1"):
        lines.append(f"| {s} | {lr['late_reward'][s]:.4f} | {', '.join(f'{x:.3f}' for x in lr['late_reward_per_seed'][s])} |")
    lines += [
        "",
        f"- Target ≥ {PIPELINING_TARGET:g}× iterations per hour at 1: {one:.2f}×, {_ok(one >= PIPELINING_TARGET)}.",
        f"- Learning within {PIPELINING_LEARNING_TOLERANCE} of strict order at iterations 16–20: {diff:+.4f}, "
        f"{_ok(abs(diff) <= PIPELINING_LEARNING_TOLERANCE)}.",
        "",
    ]
    return lines


def real_model_section(rm: dict) -> list[str]:
    run = rm["run"]
    lines = [
        f"## {TITLES['real_model']}",
        "",
        f"{rm['model']} served by llama.cpp's `llama-server` on loopback (2 slots of 8,192 tokens, this machine's "
        f"2 cores), as the policy (`MODEL_BACKEND=openai`) and the RULER judge (`JUDGE_MAX_TOKENS=1024`): "
        f"{run['iterations']} iterations, K = {run['rollouts_per_group']}, one scenario, "
        f"{run.get('max_tokens_per_turn', 1024)} tokens a turn (`make bench-real-model`). The run {rm['status']} in "
        f"{rm['seconds']:.0f} s" + (f": {rm['error']['message']} (step {rm['error']['step']})." if rm["error"] else "."),
        "",
        "| iteration | seconds | rollout ends | corrections | JSON turns | judge: groups, judged, retried, dropped, errors | email attempts |",
        "|---|---|---|---|---|---|---|",
    ]
    for it in rm["iterations"]:
        ends = ", ".join(f"{k} {v:g}" for k, v in it["ends"].items() if v) or "–"
        j = it["judge"]
        errors = ", ".join(f"{k.removeprefix('errors/')} {v:g}" for k, v in j.items() if k.startswith("errors/") and v) or "none"
        judge = (f"{j['groups']:g}, {j['judged']:g}, {j['retried']:g}, {j['dropped']:g}, {errors}" if j else "–")
        corrections = "–" if it["corrections"] is None else f"{it['corrections']:g}"
        json_turns = "–" if it.get("json_turns") is None else f"{it['json_turns']:g}"
        attempts = "–" if it["email_attempts"] is None else f"{it['email_attempts']:g}"
        lines.append(f"| {it['iteration']} | {it['seconds']:.0f} | {ends} | {corrections} | {json_turns} | {judge} | {attempts} |")
    lines += ["", "The published emails:", ""]
    for it in rm["iterations"]:
        email = it["email"]
        body = " ".join(email["body"].split())
        lines += [f"- Iteration {it['iteration']} (score {email['score']}, cites {', '.join(email['citations']) or 'nothing'}): "
                  f"**{email['subject']}** {body[:400]}{'…' if len(body) > 400 else ''}"]
    return lines + [""]


TRANSFER_TARGET = 1.2
DRAFTS_PER_S_TARGET = 20
DRAFT_READS_P99_MS = 50


def _when(part: dict) -> str:
    m = part["machine"]
    code = f", commit `{m['commit']}`" if m.get("commit") else ""
    return f"{m['date']}{code}, {m['cores']} cores, {m['memory_gib']} GiB, load average {part['load_average_before']:.1f} as it began"


def drafts_section(dr: dict) -> list[str]:
    lines = [
        f"## {TITLES['drafts']}",
        "",
        "How fast drafts are written, on the embedded backend and against a latency-injected one, with look-alike "
        "prospects of the demo's scenarios (`bench/drafts.py`). `.venv/bin/python -m bench drafts` "
        "(`DRAFTS_PARTS=throughput` for one part). What the drafts earn from readers is measured in the simulated world "
        "(its own page).",
        "",
    ]
    if th := dr.get("throughput"):
        lines += [
            f"### Throughput ({_when(th)}; {th['seconds']:.0f} s)",
            "",
            f"`codreamer serve` on SQLite (the API; its run worker and the embedded model server in child processes); a run "
            f"of {th['policy_run']['iterations']} iterations deployed; then one batch of {th['batch']:,} look-alikes at each "
            "read rate, while an open-loop client reads: 50% the batch (progress), 30% a page of 50 drafts, 10% the "
            "deployment, 10% the policy. Drafts a second: the batch's count over its `created_at` → `finished_at`. Cores: "
            "CPU seconds per second of each process while the batch ran.",
            "",
            "| reads/s | drafts/s | batch s | reads p50 ms | reads p99 ms | p99 by read: batch / page / deployment / policy | "
            "errors | p99 ms with no batch | cores: API / worker / model server |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for b in th["batches"]:
            r, quiet, c = b["reads"], th["quiet"].get(str(b["read_rate"]), {}), b["cores"]
            by = " / ".join(f"{r['p99_ms_by_read'].get(k, 0):.1f}" for k in ("batch", "drafts_page", "deployment", "policy"))
            lines.append(f"| {b['read_rate']:g} | {b['drafts_per_s']:.1f} | {b['batch_seconds']:.1f} | {r['p50_ms']:.1f} | "
                         f"{r['p99_ms']:.1f} | {by} | {r['errors']} | {quiet.get('p99_ms', float('nan')):.1f} | "
                         f"{c['api']:.2f} / {c['worker']:.2f} / {c['model_server']:.2f} |")
        lines += [
            "",
            f"- ≥ {DRAFTS_PER_S_TARGET} drafts/s: " + "; ".join(
                f"{b['drafts_per_s']:.1f} at {b['read_rate']:g} reads/s, {_ok(b['drafts_per_s'] >= DRAFTS_PER_S_TARGET)}"
                for b in th["batches"]) + ".",
            f"- Reads p99 < {DRAFT_READS_P99_MS} ms meanwhile: " + "; ".join(
                f"{b['reads']['p99_ms']:.1f} ms at {b['read_rate']:g} reads/s, {_ok(b['reads']['p99_ms'] < DRAFT_READS_P99_MS)}"
                for b in th["batches"]) + ".",
        ]
        lines += [""] + DRAFT_PROFILE + [""]
    if so := dr.get("scale_out"):
        lines += [
            f"### Scale-out across workers ({_when(so)}; {so['seconds']:.0f} s)",
            "",
            f"The policy is a fixed model (`MODEL_BACKEND=openai`, a run of one iteration) and the judge a RULER judge, both "
            f"the orchestration benchmark's latency-injected OpenAI-compatible server on loopback ({so['latency_s']} s a "
            f"call, policy and judge alike; {so['max_turns']} turns a draft). API-only `serve` plus 1 or 2 `codreamer worker` "
            f"processes on one PostgreSQL database. Each chunk of 25 prospects is a workflow of its own on the "
            f"`draft_chunks` queue, and each worker drafts at most {so['per_worker']} chunks at once (WORKER_CONCURRENCY), "
            "of one batch or several. The same 1,000 look-alikes as one batch, and as four batches of 250 posted at once."
            + (" All of them are one tenant's, whose limit on chunks drafted at once (`DRAFT_CONCURRENCY_PER_TENANT`, "
               f"default 2) is set to what its workers draft: {so['per_worker']} a worker."
               if so.get("tenant_limit_raised") else ""),
            "",
            "| batches | workers | drafted | seconds | drafts per minute | vs 1 worker |",
            "|---|---|---|---|---|---|",
        ]
        for r in so["results"]:
            base = next(x for x in so["results"] if x["batches"] == r["batches"] and x["workers"] == 1)
            lines.append(f"| {r['batches']} | {r['workers']} | {r['drafted']:,} / {r['prospects']:,} | {r['seconds']:.1f} | "
                         f"{r['drafts_per_minute']:.0f} | {r['drafts_per_minute'] / base['drafts_per_minute']:.2f}× |")
        lines += [
            "",
            "- Target ≥ 1.8× at 2 workers: " + "; ".join(
                f"{b} batch{'es' if b != '1' else ''}: {x:.2f}×, {_ok(x >= 1.8)}" for b, x in so["speedup"].items()) + ".",
            "- A batch's workflow enqueues its chunks and waits for them: a second worker drafts a share of one batch "
            "as of several. " + _layouts(so),
            "",
        ]
    return lines


def _layouts(so: dict) -> str:
    """What one batch and four have in common: each worker drafts the same chunks at once however they are batched."""
    rate = {(r["batches"], r["workers"]): r["drafts_per_minute"] for r in so["results"]}
    if not all((b, w) in rate for b in (1, 4) for w in (1, 2)):
        return ""
    return (f"One batch and four drafted {rate[1, 1]:.0f} and {rate[4, 1]:.0f} a minute on 1 worker, {rate[1, 2]:.0f} and "
            f"{rate[4, 2]:.0f} on 2: each worker drafts {so['per_worker']} chunks at once however the prospects are "
            "batched, so the layouts should draft alike; the load on this machine's two cores (other sessions' "
            f"benchmarks and tests, {so['load_average_before']:.1f} as this part began) varied as each ran.")


# Profiled once with py-spy (20 Hz, the worker while the throughput part drafted, `serve` on SQLite, 2026-11-27, load
# average about 20 from other sessions); not re-measured by the benchmark.
DRAFT_PROFILE = [
    "Where the worker's time goes (py-spy, the worker's event loop while this part drafted; this machine's two cores "
    "shared with other sessions):",
    "",
    "- Per draft a rollout of a few policy turns and one judge call, each an HTTP request to the embedded model "
    "server: 41% of the loop's samples are the OpenAI SDK building requests and parsing answers, 35% the judge's "
    "RULER call through litellm, 11% aiohttp, whose pool keeps the policy's connections (httpx's pool polled every "
    "pooled socket on each request and each response's end; its samples are gone), 3% SQL, 1% DBOS.",
    "- A batch's chunks of 25 prospects are workflows of their own on the `draft_chunks` queue; the worker drafts "
    "WORKER_CONCURRENCY (2) of them at once, so one chunk's store and the next chunk's start overlap the other's drafts.",
]

OPE_WITHIN_TARGET = 0.8
OPE_SEEDS_TARGET = 10
ESTIMATOR_NAMES = {"ips": "IPS", "snips": "SNIPS", "dr": "DR"}


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}"


def _plain(x: float | None, fmt: str = ".3f") -> str:
    return "—" if x is None else format(x, fmt)


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _load(values) -> str:
    return "/".join(f"{x:.1f}" for x in values) if isinstance(values, list) else f"{values:.1f}"


def ope_section(ope: dict) -> list[str]:
    volumes = ope["by_volume"]
    share = ope["share"]
    lines = [
        f"### Off-policy accuracy by volume ({ope['machine']['date']}, {ope['machine']['cores']} cores, "
        f"{ope['machine']['memory_gib']} GiB; {ope['seconds']:.0f} s; load average (1/5/15 min) "
        f"{_load(ope['load_average_before'])} as it began, {_load(ope['load_average_after'])} as it ended)",
        "",
        *([f"Seeds {', '.join(map(str, ope['resumed_seeds']))} were measured by an earlier measurement that was stopped "
           "(`OPE_SEEDS_FILE`); the time and load above are this one's, each seed's own time is below.", ""]
          if ope.get("resumed_seeds") else []),
        f"Per seed ({ope['seeds']} seeds, {ope['workers']} at a time): a run of {ope['iterations']} iterations "
        "(`feedback_source: oracle`); its untrained policy `@0` is the champion and its last policy the challenger, at "
        f"{1 - share:.0%}/{share:.0%}. One stream of look-alikes is drafted by the deployment in batches of "
        + ", ".join("+".join(f"{n:,}" for n in sizes) for sizes in ope["batches"])
        + " (`POST /drafts` takes at most 1,000), each batch sent as it is drafted; after "
        + ", ".join(f"{v:,}" for v in ope["volumes"])
        + f" logged sends, `POST /evaluations` with both policies and {ope['held_out']} held-out look-alikes. DR's direct "
        "method is, per logged send, the outcome model's predicted reply rate of the policy's emails to the held-out "
        "look-alikes like the same training scenario as the send's prospect. Every batch has as many look-alikes of each "
        "of the demo's 10 scenarios. The **true value** of a policy is its mean true reply probability over such a "
        f"population, measured on the first {ope['truth_sample']} prospects (its own drafts where it was drawn, a batch "
        "it drafts alone, never sent, for the rest), each scenario weighted alike; its standard error (from the spread "
        f"within scenarios) is {ope['truth_se']:.4f} for the challenger. Error = estimate − true value; the interval is "
        "the evaluation's 90% interval.",
        "",
        "| logged sends | challenger's sends (ESS) | estimator | within ±0.03 | bias | spread (sd of the error) | RMSE | "
        "90% interval width | interval holds the true value |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in volumes:
        matched = sum(v["matched"]) / len(v["matched"])
        for name, acc in v["roles"]["challenger"]["estimators"].items():
            lines.append(f"| {v['volume']:,} | {matched:.0f} ({v['ess']:.0f}) | {ESTIMATOR_NAMES[name]} | {acc['within']:.0%} | "
                         f"{_signed(acc['bias'])} | {_plain(acc['spread'])} | {_plain(acc['rmse'])} | "
                         f"{_plain(acc['width'])} | {_plain(acc['coverage'], '.0%')} |")
    challenger_truth = volumes[0]["roles"]["challenger"]["truth"]
    champion_truth = volumes[0]["roles"]["champion"]["truth"]
    lines += [
        "",
        f"The challenger's true value, mean over seeds: {challenger_truth:.3f}; per seed: "
        + ", ".join(f"{s['truth']['challenger']:.3f}" for s in ope["per_seed"]) + ". "
        f"The champion ({1 - share:.0%} of the sends, true {champion_truth:.3f}): SNIPS within ±0.03 in "
        + ", ".join(f"{v['roles']['champion']['estimators']['snips']['within']:.0%}" for v in volumes)
        + " of seeds, DR in " + ", ".join(f"{v['roles']['champion']['estimators']['dr']['within']:.0%}" for v in volumes)
        + " (at " + ", ".join(f"{v['volume']:,}" for v in volumes) + " sends).",
        "",
    ]
    verdicts = []
    judged = ope["seeds"] >= OPE_SEEDS_TARGET
    for v in volumes:
        est = v["roles"]["challenger"]["estimators"]
        both = all(est[n]["within"] >= OPE_WITHIN_TARGET for n in ("snips", "dr"))
        verdicts.append(f"at {v['volume']:,} sends SNIPS {est['snips']['within']:.0%}, DR {est['dr']['within']:.0%}"
                        + (f": {_ok(both)}" if judged else ""))
    met = [v["volume"] for v in volumes if all(v["roles"]["challenger"]["estimators"][n]["within"] >= OPE_WITHIN_TARGET
                                               for n in ("snips", "dr"))]
    last = volumes[-1]
    verdict = ((f"Met from {met[0]:,} logged sends per evaluation" if met else "Met at none of the volumes measured")
               + f"; at 400 it is {'met' if 400 in met else 'missed'}."
               if judged else f"**Not judged**: {ope['seeds']} of the {OPE_SEEDS_TARGET} seeds the target asks for were "
               "measured (`OPE_SEEDS_FILE` lets a later measurement go on from them).")
    lines += [
        f"- Target (SNIPS and DR within ±{ope['tolerance']:g} of the challenger's true value in ≥ {OPE_WITHIN_TARGET:.0%} of "
        f"{OPE_SEEDS_TARGET} seeds, at {1 - share:.0%}/{share:.0%}): " + "; ".join(verdicts) + ". " + verdict,
        f"- What bounds it: the challenger's own sends. At {share:.0%} of the traffic it wrote "
        + ", ".join(f"{sum(v['matched']) / len(v['matched']):.0f}" for v in volumes)
        + " of them; SNIPS is their mean reply, whose binomial noise √(p(1−p)/n) at p = "
        f"{challenger_truth:.3f} is " + ", ".join(f"{v['binomial_spread']:.3f}" for v in volumes)
        + "; the measured spreads of SNIPS are " + ", ".join(_plain(v["roles"]["challenger"]["estimators"]["snips"]["spread"]) for v in volumes)
        + f". Within ±0.03 in 80% of seeds needs a spread of 0.03 / 1.28 = 0.023: about {ope['sends_needed']:,} logged "
        f"sends at a {share:.0%} share (about {ope['sends_needed'] * share:,.0f} of the challenger's own), "
        f"{ope['sends_needed'] / 2000:.1f} weeks of a team's 2,000 sends; a team that gives the challenger more of the traffic "
        "needs proportionally fewer (n ∝ 1/share). The 409 of a gated promotion asks a different question (how many sends "
        "of each tell the two policies' observed rates apart), a two-proportion sample size.",
        "- DR against SNIPS: the direct method takes out only what the outcome model predicts from the prospect; the "
        "reply itself is a coin flip no model predicts. Measured spread of the error, SNIPS / DR: "
        + ", ".join(f"{_plain(v['roles']['challenger']['estimators']['snips']['spread'])} / "
                    f"{_plain(v['roles']['challenger']['estimators']['dr']['spread'])} at {v['volume']:,}" for v in volumes)
        + ". With a perfect outcome model (each prospect's true probability as the direct method, the projection's last "
        "column) DR is within ±0.03 in " + ", ".join(
            f"{ope['projection'][str(n)]['dr_perfect']:.0%} (SNIPS {ope['projection'][str(n)]['snips']:.0%}) at {n:,}"
            for n in (400, 4000) if str(n) in ope["projection"]) + " sends: the most any direct method could add.",
        f"- An evaluation over {last['volume']:,} logged sends took {last['evaluation_s']:.1f} s on average (at most "
        f"{last['evaluation_s_max']:.1f} s), writing and judging each policy's {ope['held_out']} held-out emails included; "
        "over " + ", ".join(f"{v['volume']:,}: {v['evaluation_s']:.1f} s" for v in volumes[:-1]) + ".",
        "- Where a seed's time went (mean over seeds): " + ", ".join(
            f"{k} {_mean(s['timings'][k] for s in ope['per_seed']):.0f} s" for k in ope["per_seed"][0]["timings"])
        + f", of {_mean(s['seconds'] for s in ope['per_seed']):.0f} s (draft: the logged batches through `POST /drafts`; "
        "truth: the first batch drafted alone by each policy; the evaluations are the rest)"
        + (". Each seed's 1-minute load average as it began and ended: " + "; ".join(
            f"{s['load_average'][0]:.1f} → {s['load_average'][1]:.1f}" for s in ope["per_seed"] if "load_average" in s)
           if any("load_average" in s for s in ope["per_seed"]) else "") + ".",
        "",
        f"Projection (not through the API): the logging replayed {ope['projection_repeats']} times per seed, prospects "
        f"drawn from each seed's truth sample with both policies' true probabilities, the same {1 - share:.0%}/{share:.0%} "
        "draw, replies drawn from the true probabilities, estimates by the service's own `app.stats.estimators`; the "
        "last column is DR with each prospect's true probability as its direct method, the most any outcome model can "
        "give DR:",
        "",
        "| logged sends | IPS within ±0.03 | SNIPS | DR, perfect outcome model |",
        "|---|---|---|---|",
    ]
    for sends, shares in ope["projection"].items():
        lines.append(f"| {int(sends):,} | {shares['ips']:.0%} | {shares['snips']:.0%} | {shares['dr_perfect']:.0%} |")
    return lines + [""]


PROMOTION_PARTS = ("ope", "regret", "regret_auto", "regret_regressing", "regret_regressing_auto",
                   "regret_regressing_auto_sequential", "peeking", "replay")


def promotion_section(pr: dict) -> list[str]:
    missing = [part for part in PROMOTION_PARTS if part not in pr]
    lines = [
        f"## {TITLES['promotion']}",
        "",
        "Issue 50's targets for promotion at real rates, in the simulated world whose readers reply a few per cent: "
        "the regret benchmark at a team's 2,000 sends a week with a third of the challengers worse; no worse policy "
        "deployed longer than one week; gated ≥ never-promote; the ratio of the gated loop's expected replies to "
        "always-promote's reported (issue 41's \"gated ≥ always-promote\" target is retired); and the gate's 409 states "
        "how many sends of each a decision needs at the observed rates (`app.stats.intervals.sends_to_decide`, a "
        "two-proportion sample size; the guide's \"The gate\"). On the demo's simulated team (the drafts benchmark's "
        "look-alikes and sends, `bench/drafts.py`). The off-policy and regret parts go through the "
        "API in process (the last two, `peeking` and `replay`, replay the service's own rules without it): "
        "`PUT /graphs/demo/deployment` (a champion and challengers with fixed shares, `require_evidence`), "
        "`POST /drafts` (each draft logs the policy drawn for it and its propensity), `POST /outcomes` (sends dated a reply "
        "window back, so they count), `POST /evaluations` (whose `off_policy` is read). **True reply probability** is the "
        "world's positive-reply probability of a draft for its prospect (`app.simulation`), read only by the benchmark. "
        "`.venv/bin/python -m bench promotion` (`PROMOTION_PARTS=ope`, `regret`, `regret_auto`, `regret_regressing`, "
        "`regret_regressing_auto`, `regret_regressing_auto_sequential`, `peeking` or `replay` for one part; "
        "`PROMOTION_SEEDS`, `PROMOTION_WEEKS` and `PROMOTION_WEEKLY_PROSPECTS` set smaller sizes; a regret part keeps "
        "the seeds of its last figures measured on the same code and sizes, and `PROMOTION_MORE_SEEDS=n` measures at "
        "most n more, so ten seeds can be gathered over several sittings); the code and what each figure means: "
        "`bench/promotion.py`.",
        "",
        *([f"Not measured on the current code, so not shown: part(s) {', '.join(f'`{m}`' for m in missing)} (figures "
           "of the previous world, whose reply rates were 25–35 %, or of older code at reduced sizes; `PROMOTION_PARTS` "
           "measures them)."] if missing else []),
        "",
    ]
    if ope := pr.get("ope"):
        lines += ope_section(ope)
    for part in ("regret", "regret_auto", "regret_regressing", "regret_regressing_auto", "regret_regressing_auto_sequential"):
        if rg := pr.get(part):
            lines += regret_section(rg)
    lines += regressions_compared(pr)
    if pk := pr.get("peeking"):
        lines += peeking_section(pk)
    if rp := pr.get("replay"):
        lines += replay_section(rp, pr)
    return lines


def replay_section(rp: dict, pr: dict) -> list[str]:
    inputs, rows = rp["inputs"], rp["rows"]
    weeks = len(inputs["line"])
    lines = [
        f"### Where gating beats always-promote: a replay ({_when(rp)}; {rp['seconds']:.0f} s)",
        "",
        f"Not through the API: {rp['repeats']} replays per row of the regret parts' loop with `auto` traffic, by the "
        "service's own rules (`app.stats.bandit.auto_shares`, SNIPS from `app.stats.estimators`, the gate's "
        f"`app.stats.intervals.compared`), drawing each reply at the true rates the API measured: the line's "
        f"challengers {', '.join(f'{q:.3f}' for q in inputs['line'])} (part `regret_auto`, mean of its seeds), the first "
        f"policy {inputs['first']:.3f}, and {inputs['regressed']:.3f} for a challenger that did not continue the line "
        f"(part `regret_regressing_auto`). Each week's challenger is such a one with the row's chance. Over {weeks} weeks "
        "(`bench.promotion.replay_regret`): the gated loop's expected replies minus always-promote's (± standard error), "
        "the share of replays in which it sent at least as many, and the share in which a policy worse than the champion "
        "it replaced was deployed, with the fixed-sample gate and the always-valid one (`sequential`):",
        "",
        "| sends a week | chance a challenger regresses | gated − always, fixed | at least as many | worse deployed | "
        "gated − always, always-valid | at least as many | worse deployed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    cells = {(r["weekly"], r["rate"], r["sequential"]): r for r in rows}
    pairs = sorted({(w, rate) for w, rate, _ in cells})
    for weekly, rate in pairs:
        fixed, valid = cells[(weekly, rate, False)], cells[(weekly, rate, True)]
        cells_of = lambda r: (f"{r['gated_minus_always']:+.1f} ± {r['gated_minus_always_se']:.1f} | "  # noqa: E731
                              f"{r['gated_at_least_always']:.0%} | {r['worse_deployed']:.1%}")
        lines.append(f"| {weekly:,} | {rate:g} | {cells_of(fixed)} | {cells_of(valid)} |")
    lines.append("")
    for weekly in sorted({w for w, _ in pairs}):
        line = cells.get((weekly, 0.0, False))
        even = [rate for w, rate in pairs if w == weekly and cells[(w, rate, False)]["gated_minus_always"] >= 0]
        from_chance = (f"from a chance of {min(even):g}" if even
                       else f"at no chance up to {max(r for w, r in pairs if w == weekly):g}")
        if line:
            lines.append(f"- {weekly:,} sends a week: with no regressing challenger the gated loop sends "
                         f"{line['totals']['gated'] / line['totals']['always']:.1%} of always-promote's replies; it "
                         f"sends at least as many on average {from_chance} (fixed-sample gate).")
    lines.append("- Volume does not close the gap on the line: each new challenger drafts an even share until it has "
                 "a week's even share of sends, and the gate needs those sends before the challenger can be promoted, "
                 "so the gated loop follows an improving line a week or more late at any volume. It gains only in the "
                 "weeks always-promote deploys a regression.")
    for sequential, name in ((False, "fixed-sample"), (True, "always-valid")):
        gate = [r for r in rows if r["sequential"] == sequential]
        lines.append(f"- A worse policy than the champion it replaced, {name} gate: deployed in at most "
                     f"{max(r['worse_deployed'] for r in gate):.1%} of a row's replays, for at most "
                     f"{max(r['longest_worse_weeks'] for r in gate)} weeks, at most "
                     f"{max(r['largest_worse_gap'] for r in gate):.3f} worse.")
    calibration = rp["calibration"]
    if (line_part := pr.get("regret_auto")) and (regressing := pr.get("regret_regressing_auto")):
        line_row = cells.get((line_part["prospects_per_week"], 0.0, False))
        if line_row:
            lines.append(f"- Against the API: on the line at {line_part['prospects_per_week']} sends a week the replay's "
                         f"gated loop sends {line_row['totals']['gated']:.1f} expected replies, the API's "
                         f"{line_part['totals']['gated']:.1f} (part `regret_auto`). With the challengers of weeks "
                         f"{', '.join(map(str, inputs['calibration_weeks']))} regressing: gated "
                         f"{calibration['totals']['gated']:.1f} and always-promote {calibration['totals']['always']:.1f} "
                         f"in the replay, {regressing['totals']['gated']:.1f} and {regressing['totals']['always']:.1f} "
                         "through the API, whose line learned from what each strategy sent and whose regressions were "
                         "each its own.")
    return lines + [""]


def peeking_section(pk: dict) -> list[str]:
    n = pk["weeks"]
    lines = [
        f"### Evaluating every week: how often the gate promotes ({_when(pk)}; {pk['seconds']:.0f} s)",
        "",
        f"Not through the API: {pk['repeats']:,} replays per row of {n} weeks of {pk['weekly_sends']} sends, a "
        f"champion whose true reply rate is {pk['rate']:g} and a challenger better, as good or worse (the gap), drawn "
        "at its share; after each week the gate's own rule (`app.stats.intervals.compared` on SNIPS from "
        "`app.stats.estimators`) asks whether the 90% interval of the difference lies above zero: the "
        "fixed-sample interval, or the always-valid one of a `sequential` deployment. The share of replays in which "
        "some look so far promoted the challenger:",
        "",
        "| challenger's gap | share | interval | " + " | ".join(f"week {w + 1}" for w in range(n)) + " |",
        "|---|---|---|" + "---|" * n,
    ]
    for row in pk["rows"]:
        lines.append(f"| {row['gap']:+.2f} | {row['share']:g} | {'always-valid' if row.get('sequential') else 'fixed'} | "
                     + " | ".join(f"{x:.1%}" for x in row["by_week"]) + " |")
    pick = lambda gap, sequential: [r for r in pk["rows"] if r["gap"] == gap and bool(r.get("sequential")) == sequential]  # noqa: E731
    span = lambda rows, week: f"{min(r['by_week'][week] for r in rows):.1%}–{max(r['by_week'][week] for r in rows):.1%}"  # noqa: E731
    lines += [
        "",
        f"- An equal challenger, fixed-sample interval: {span(pick(0.0, False), 0)} at one look, as a one-sided 5% "
        f"test should; {span(pick(0.0, False), -1)} with a look every week for {n} weeks. A team that evaluates "
        "every week and promotes on the first look that clears zero (as `auto_promote` does) accepts that rate. "
        f"Always-valid: {span(pick(0.0, True), -1)} after {n} looks.",
    ]
    if worse := [r for r in pk["rows"] if r["gap"] < 0]:
        gap = worse[0]["gap"]
        lines.append(f"- A challenger {-gap:.2f} worse, after {n} looks: {span(pick(gap, False), -1)} fixed-sample, "
                     f"{span(pick(gap, True), -1)} always-valid. A worse champion can be rolled back once an evaluation "
                     "puts the one it replaced ahead; the replay below measures how long a worse one stays.")
    if better := [r for r in pk["rows"] if r["gap"] > 0]:
        gap = better[0]["gap"]
        lines.append(f"- What the always-valid interval costs: a challenger {gap:.2f} better is promoted by week {n} in "
                     f"{span(pick(gap, False), -1)} of replays with the fixed-sample interval, "
                     f"{span(pick(gap, True), -1)} with the always-valid one (by week 2: {span(pick(gap, False), 1)} "
                     f"against {span(pick(gap, True), 1)}).")
    return lines + [""]


def regressions_compared(pr: dict) -> list[str]:
    """Per traffic mode, what the regressing challengers cost each strategy and how far the gated loop stays behind
    always-promote on either line."""
    rows = []
    for label, line, regressing in (("fixed shares", "regret", "regret_regressing"),
                                    ("auto traffic", "regret_auto", "regret_regressing_auto")):
        if (a := pr.get(line)) and (b := pr.get(regressing)):
            ta, tb = a["totals"], b["totals"]
            rows.append(f"| {label} | {ta['always'] - tb['always']:.1f} | {ta['gated'] - tb['gated']:.1f} | "
                        f"{ta['always'] - ta['gated']:.1f} | {tb['always'] - tb['gated']:.1f} |")
    if not rows:
        return []
    weeks = next(pr[part]["regressed_weeks"] for part in ("regret_regressing", "regret_regressing_auto") if part in pr)
    return [
        "### What regressing challengers change",
        "",
        f"The same seeds and prospects; the challengers of weeks {', '.join(map(str, weeks))} did not continue the line, "
        "and the line's later runs learn from what was sent instead. Expected replies over the "
        f"{pr[next(iter(p for p in ('regret_regressing', 'regret_regressing_auto') if p in pr))]['weeks']} weeks, mean "
        "over seeds:",
        "",
        "| traffic | always-promote lost to the regressions | gated lost | gated behind always-promote, the line | the same, regressing |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "- Always-promote deploys each regression for its week. The gated loop never promotes one, but still lets it draft "
        "its share while its sends accumulate.",
        "- The gap to always-promote shrinks, but stays: a 90% interval of the difference cannot put a challenger a "
        "little better than the champion ahead within its first weeks.",
        *_sequential_compared(pr),
        "",
    ]


def _sequential_compared(pr: dict) -> list[str]:
    fixed, sequential = pr.get("regret_regressing_auto"), pr.get("regret_regressing_auto_sequential")
    if not (fixed and sequential):
        return []
    weeks = lambda rg: "; ".join(f"seed {m['seed']}: " + (", ".join(f"week {p['week']}" for p in m["promotions"]) or "none")  # noqa: E731
                                 for m in rg["per_seed"])
    return [f"- With the always-valid gate (`sequential`, auto traffic): gated {sequential['totals']['gated']:.1f} "
            f"against {fixed['totals']['gated']:.1f} with the fixed-sample one; promotions ({weeks(sequential)}) against "
            f"({weeks(fixed)}). Under auto traffic most drafts follow the evidence before any promotion, so the "
            "gate's rule moves the total little."]


def regret_section(rg: dict) -> list[str]:
    totals, seeds = rg["totals"], rg["per_seed"]
    n = rg["weeks"]
    auto = rg.get("traffic") == "auto"
    regressed = rg.get("regressed_weeks") or []
    gated_vs = {s: sum(m["totals"]["gated"] >= m["totals"][s] for m in seeds) for s in ("always", "never")}
    joins = (f"with `traffic: auto` (top-two Thompson sampling over the policies' reply rates, a floor of {rg['floor']:g}; "
             f"a challenger drafts an even share until it has {rg['min_sends']} mature sends, a week's even share)" if auto
             else f"at a share of {rg['share']:g}")
    lines = [
        f"### Regret over {n} weeks, {'auto traffic' if auto else 'fixed shares'}"
        f"{', challengers that regress' if regressed else ''}{', always-valid gate' if rg.get('sequential') else ''} "
        f"({_when(rg)}; {rg['seconds']:.0f} s, "
        f"{rg['week_seconds']:.0f} s a week, load average {rg['load_average_after']:.1f} as it ended)",
        "",
        regret_sizes(rg) + regret_sittings(seeds) + f" A first run of {rg['first_iterations']} "
        "iterations (`feedback_source: outcomes`: nothing sent yet, so the judge alone) is the first champion. Each week "
        f"a new challenger arrives, a run of {rg['weekly_iterations']} iterations continued (`init_from`) from the previous "
        "week's challenger and learning from every outcome so far (the team's training line), and "
        f"{rg['prospects_per_week']} new look-alikes are drafted. "
        + (f"Except in weeks {', '.join(map(str, regressed))}: that week's challenger is a teammate's run that did not "
           f"continue the line, {rg['weekly_iterations']} iterations from scratch on the judge alone (`feedback_source: "
           "none`), and the line goes on from its own last policy the week after. " if regressed else "")
        + f"The three strategies meet the same challengers and "
        f"prospects. **Gated**: the deployment requires evidence; the week's challenger joins it {joins} "
        f"(up to {rg['max_challengers']} challengers, the oldest leaves), the batch is drafted by the "
        "deployment and sent, an evaluation compares every deployed policy, and a challenger whose estimate is above "
        "the champion's is put to `PUT` (accepted only when the "
        + ("always-valid 90% interval of the difference (`sequential`)" if rg.get("sequential")
           else "90% interval of the difference")
        + " lies above zero, else 409); the "
        "champion it replaces stays as a challenger. **Always-promote**: the week's challenger writes every email. "
        "**Never-promote**: the first policy writes every email. Total = the sum of the true reply probabilities of "
        "the strategy's drafts over the weeks (expected replies).",
        "",
        "| strategy | total true replies, mean over seeds | per seed |",
        "|---|---|---|",
    ]
    for s, label in (("gated", "gated"), ("always", "always-promote"), ("never", "never-promote")):
        lines.append(f"| {label} | {totals[s]:.1f} | " + ", ".join(f"{m['totals'][s]:.1f}" for m in seeds) + " |")
    lines += [
        "",
        "| week | " + " | ".join(str(w + 1) for w in range(n)) + " |",
        "|---|" + "---|" * n,
    ]
    for s, label in (("gated", "gated"), ("always", "always-promote"), ("never", "never-promote")):
        lines.append(f"| {label} | " + " | ".join(f"{x:.1f}" for x in rg["per_week"][s]) + " |")
    lines += [
        "",
        "Per seed: each week's new challenger's quality (the mean true reply probability of its emails to its week's "
        "prospects) against the first policy's" + (" († a challenger that did not continue the line)" if regressed else "")
        + ", and the gated loop's promotions: " + "; ".join(
            f"seed {m['seed']}: first {m['quality'][m['champions'][0]]:.3f}, challengers "
            + ", ".join(f"{m['quality'][w['new']]:.3f}{'†' if w.get('regressed') else ''}" for w in m["weeks"])
            + f", {len(m['promotions'])} promotion(s)"
            + (" (" + ", ".join(f"week {p['week']}" for p in m["promotions"]) + ")" if m["promotions"] else "")
            + f", {m['refused']} refused by the gate" for m in seeds) + ".",
        "",
        f"- Gated ÷ always-promote (reported; issue 41's \"gated ≥ always-promote\" target is retired): "
        f"{totals['gated'] / totals['always']:.3f} ({totals['gated']:.1f} vs {totals['always']:.1f}; per seed "
        + ", ".join(f"{m['totals']['gated'] / m['totals']['always']:.3f}" for m in seeds)
        + f"; at least as many in {gated_vs['always']} of {len(seeds)} seeds{seeds_interval(seeds, 'always')}).",
        f"- Gated ≥ never-promote: {totals['gated']:.1f} vs {totals['never']:.1f}, {_ok(totals['gated'] >= totals['never'])} "
        f"(gated ÷ never-promote {totals['gated'] / totals['never']:.3f}{seeds_interval(seeds, 'never')}; at least as "
        f"many in {gated_vs['never']} of {len(seeds)} seeds).",
        f"- A worse policy (below the champion it replaced) deployed for more than one week: longest "
        f"{rg['longest_worse_weeks']} week(s), {_ok(rg['longest_worse_weeks'] <= 1)}"
        f"{' (vacuously: the gate promoted nothing)' if rg['promotions'] == 0 else ''}. Weeks in which a deployed "
        "challenger was truly better than the champion while the evidence did not show it: " + "; ".join(
            f"seed {m['seed']}: {len(m['better_challenger_waiting_weeks'])} of {n}" for m in seeds) + ".",
    ]
    return lines + _regret_reasons(rg) + [""]


REGRET_SEEDS_TARGET, REGRET_WEEKS_TARGET, REGRET_WEEKLY_TARGET = 10, 8, 2_000  # issue 50's sizes


def seeds_interval(seeds: list[dict], other: str) -> str:
    """"; 90 % interval a–b" of the gated loop's total over `other`'s, resampling the seeds (none under 3 seeds)."""
    if len(seeds) < 3:
        return ""
    from bench.drafts import ratio_interval

    low, high = ratio_interval([m["totals"]["gated"] for m in seeds], [m["totals"][other] for m in seeds])
    return f"; 90 % interval over the seeds {low:.3f}–{high:.3f}"


def _api_met(r: dict) -> bool:
    """The API target: p99 under 50 ms, no errors, and the rate asked for (within 5 %)."""
    return r["p99_ms"] < 50 and r["errors"] == 0 and r["throughput_rps"] >= 0.95 * r["target_rps"]


def api_section(api: list[dict]) -> list[str]:
    """20 runs in flight while clients poll; where the CPU goes, per process, from the figures alone."""
    lines = [
        f"## {TITLES['api']}",
        "",
        "20 runs in flight on the embedded backend; clients poll at a fixed arrival rate (open loop, aiohttp):",
        "70% `GET /runs/{id}`, 20% `GET /runs?limit=20`, 10% `GET /runs/{id}/iterations`. Target: p99 < 50 ms at",
        "200 requests/s with no errors. `serve` is the default, one command: the API in one process, its run",
        "worker and the embedded model server (policy, judge, GRPO) in child processes; the split layout is an",
        "API-only `serve` and a `codreamer worker` at `nice 19`.",
        "",
        "| database | layout | achieved req/s | p50 ms | p90 ms | p99 ms | errors | iterations done meanwhile "
        "| target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in api:
        lines.append(f"| {r['database']} | {r['layout']} | {r['throughput_rps']:.0f} | {r['p50_ms']:.1f} "
                     f"| {r['p90_ms']:.1f} | {r['p99_ms']:.1f} | {r['errors']} | {r['iterations_during_load']} "
                     f"| {_ok(_api_met(r))} |")
    lines += [
        "",
        "Where the CPU goes, in cores kept busy (one Python process uses at most one): with the runs alone (10 s",
        "before the load), under the load, and the API alone (the same data, every run stopped, the same rate).",
        "In the split layout the runs live in the worker, which is not measured.",
        "",
        "| database | layout | runs alone: API process | runs alone: its child processes | under load: API process | "
        "under load: its child processes | API alone: req/s | API alone: p50 / p99 ms | API alone: CPU ms per request "
        "| load average |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in api:
        ra, alone = r["runs_alone"], r["api_alone"]
        # figures measured before `serve` had a run worker child name its one child, the model server
        children = ra.get("children", ra.get("model_server"))
        loaded_children = r.get("cores_children", r.get("cores_model_server"))
        lines.append(f"| {r['database']} | {r['layout']} | {ra['serve']:.2f} | {children:.2f} "
                     f"| {r['cores_serve']:.2f} | {loaded_children:.2f} | {alone['throughput_rps']:.0f} "
                     f"| {alone['p50_ms']:.1f} / {alone['p99_ms']:.1f} | {alone['cpu_ms_per_request']:.2f} "
                     f"| {r['load_average_before']:.1f} |")
    lines.append("")
    for r in api:
        cost = r["api_alone"]["cpu_ms_per_request"]
        lines.append(f"- {r['database']}, {r['layout']}: p99 {r['p99_ms']:.1f} ms at {r['throughput_rps']:.0f} "
                     f"requests/s with the runs in flight, {_ok(_api_met(r))}; with every run stopped a request costs "
                     f"the API process {cost:.2f} ms of CPU, so one process serves at most about "
                     f"{1000 / cost:,.0f} requests/s.")
    return lines + [""]


def regret_sittings(seeds: list[dict]) -> str:
    """Which seeds were measured on which commit, day and CPU (the same code throughout: a part keeps only the seeds
    measured on the code it runs)."""
    sittings: dict[tuple, list[int]] = {}
    for s in seeds:
        if "commit" in s:
            sittings.setdefault((s["commit"], s["measured_at"][:10], s["cpu"]), []).append(s["seed"])
    if not sittings:
        return ""
    said = [f"eed(s) {', '.join(map(str, ids))} measured on commit `{c}` on {day} ({cpu})"
            for (c, day, cpu), ids in sittings.items()]
    return " S" + "; s".join(said) + "."


def regret_sizes(rg: dict) -> str:
    """The part's sizes, saying which fall below issue 50's."""
    wanted = ((rg["seeds"], REGRET_SEEDS_TARGET, "seeds"), (rg["weeks"], REGRET_WEEKS_TARGET, "weeks"),
              (rg["prospects_per_week"], REGRET_WEEKLY_TARGET, "sends a week"))
    below = [f"{have:,} {what} of the {want:,} the targets ask for" for have, want, what in wanted if have < want]
    if below:
        return f"**Measured at reduced sizes**: {'; '.join(below)}."
    return f"{rg['seeds']} seeds, {rg['weeks']} weeks of {rg['prospects_per_week']:,} sends."


def _regret_reasons(rg: dict) -> list[str]:
    """What the evidence could and could not show, from the last week's evaluation of each seed."""
    seeds, n = rg["per_seed"], rg["weeks"]
    half = lambda e: (e["high"] - e["low"]) / 2  # noqa: E731
    sends, challenger_half, champion_half, gaps = [], [], [], []
    for m in seeds:
        last = m["weeks"][-1]
        for policy, evidence in last["evidence"].items():
            if evidence["estimate"] is None:
                continue
            if policy == last["champion"]:
                champion_half.append(half(evidence["estimate"]))
            else:
                sends.append(evidence["matched"])
                challenger_half.append(half(evidence["estimate"]))
                gaps.append(m["quality"][policy] - m["quality"][last["champion"]])
    lines = []
    if sends and champion_half:
        c, h = sum(challenger_half) / len(challenger_half), sum(champion_half) / len(champion_half)
        lines.append(
            f"- What the evidence could show: in week {n} each challenger had {min(sends)}–{max(sends)} mature sends ("
            + (f"a {rg['share']:g} share" if "share" in rg else "its auto share")
            + f" of {rg['prospects_per_week']} a week, for at most {rg['max_challengers']} weeks, plus the "
            f"weeks a demoted champion stays), so its 90% interval was ±{c:.3f} wide on average against ±{h:.3f} for the "
            f"champion: only a difference above about {math.hypot(c, h):.3f} clears zero. The challengers' true differences from "
            f"the champion were {min(gaps):+.3f} to {max(gaps):+.3f}.")
    sent, replied = (sum(w[k] for m in seeds for w in m["weeks"]) for k in ("sent", "replied"))
    qualities = [q for m in seeds for q in m["quality"].values()]
    lines.append(f"- The rates: {replied:,} of the gated loop's {sent:,} sends got a human reply of any kind "
                 f"({replied / sent:.2%}); the policies' true positive-reply rates were {min(qualities):.2%} to "
                 f"{max(qualities):.2%}.")
    needs = [(sends_to_decide(e["estimate"]["value"], last["evidence"][last["champion"]]["estimate"]["value"]),
              e["matched"]) for m in seeds for last in [m["weeks"][-1]] for policy, e in last["evidence"].items()
             if policy != last["champion"] and e["estimate"] and last["evidence"][last["champion"]]["estimate"]]
    if decided := [(n, has) for n, has in needs if n is not None]:
        lines.append(f"- What a decision needs at these rates (the 409's figure, `app.stats.intervals.sends_to_decide`): "
                     f"at week {n}'s estimates, telling a challenger from the champion needs "
                     + ", ".join(f"{need:,}" for need, _ in sorted(decided)) + " sends of each; the challengers had "
                     + ", ".join(f"{has:,}" for _, has in sorted(decided)) + ".")
    line = [[w for w in m["weeks"] if not w.get("regressed")] for m in seeds]
    weeks = [(m["quality"][a["new"]], m["quality"][b["new"]]) for m, ws in zip(seeds, line) for a, b in zip(ws, ws[1:])]
    kept_up = sum(now >= 0.95 * before for before, now in weeks)
    lines.append(
        f"- The line: in {kept_up} of {len(weeks)} steps its new challenger was at least as good as the one before it "
        "(within 5 %). Where each is, promoting each at once deploys about the best policy there is: a gate matches that "
        "only where the first week's sends already show the challenger ahead, and gains on always-promote only in the "
        "weeks a challenger is worse than the champion.")
    worse = [(m["quality"][w["new"]] < m["quality"][w["champion"]], w.get("regressed")) for m in seeds for w in m["weeks"]]
    lines.append(f"- Challengers truly worse than the champion they met: {sum(w for w, _ in worse)} of {len(worse)}"
                 + (f"; of those that did not continue the line, {sum(w for w, r in worse if r)} of "
                    f"{sum(1 for _, r in worse if r)}" if rg.get("regressed_weeks") else "") + ".")
    if rg.get("regressed_weeks"):
        lines.append("- The regressions, per seed and week: " + "; ".join(_regression(m, w) for m in seeds
                                                                       for w in m["weeks"] if w.get("regressed")) + ".")
    refused = sum(m["refused"] for m in seeds)
    if refused and all("refused_truly_worse" in m for m in seeds):
        worse = sum(m["refused_truly_worse"] for m in seeds)
        lines.append(f"- The gate refused {refused} promotions (a challenger's estimate above the champion's, the interval "
                     f"of the difference holding zero); {worse} of them were of a challenger truly worse than the champion.")
    if all("challenger_drafts_share" in m for m in seeds):
        share = sum(m["challenger_drafts_share"] for m in seeds) / len(seeds)
        first = [m["quality"][m["champions"][0]] for m in seeds]
        line = [sum(m["quality"][w["new"]] for w in m["weeks"]) / n for m in seeds]
        lines.append(
            f"- The gated loop's difference from never-promote is its challengers' traffic: they wrote {share:.0%} of its "
            f"drafts. The challengers' mean quality against the first policy's, per seed: " + "; ".join(
                f"{q:.3f} vs {f:.3f}" for q, f in zip(line, first)) + ". The same gap decides always-promote against "
            "never-promote.")
    return lines


def _regression(seed: dict, week: dict) -> str:
    """A challenger that did not continue the line: its quality against the line's policy before it, what
    always-promote and the gated loop sent that week, and how much of the gated loop's traffic it drew."""
    before = [w for w in seed["weeks"] if w["week"] < week["week"] and not w.get("regressed")]
    line = seed["quality"][before[-1]["new"]] if before else seed["quality"][seed["champions"][0]]
    drawn = week["drawn"].get(week["new"], 0)
    return (f"seed {seed['seed']}, week {week['week']}: quality {seed['quality'][week['new']]:.3f} against the line's "
            f"{line:.3f}; that week always-promote sent {week['always']:.1f} expected replies, the gated loop "
            f"{week['gated']:.1f}, which drew it for {drawn} of its {sum(week['drawn'].values())} drafts")


def _interval(pair: list[float], fmt: str = ".2f") -> str:
    return f"{pair[0]:{fmt}}–{pair[1]:{fmt}}"


WEEKLY_RISE_TARGET = 1.25  # week 8's positive-reply probability over week 1's (issue 50)


def weekly_section(wk: dict) -> list[str]:
    """The weekly loop at a team's volume: week by week, the deployment's drafts against the rule's, in the world."""
    sizes, seeds, weeks = wk["sizes"], wk["per_seed"], wk["per_week"]
    n, last = len(seeds), len(weeks)
    percent = lambda x: f"{x:.2%}"  # noqa: E731
    rise, over_rule = wk["last_over_first"], wk["last_over_rule"]
    lines = [
        f"## {TITLES['weekly']}",
        "",
        f"{n} seeds (each a market of the world, `SimulatedTeam(demo_graph(), market_seed=seed)`), {last} weeks, "
        f"{sizes['sends']:,} new prospects a week: half look-alikes of the demo's scenarios, half from industries and "
        "roles no scenario has. A first run of "
        f"{wk['first_iterations']} iterations (`feedback_source: outcomes`: nothing sent yet, so the judge alone) is "
        "deployed. Each week the deployment drafts the week's prospects (`POST /drafts`); the simulated team sends a fifth "
        "of them each working morning; what happened up to the week's end comes back through the providers' endpoints "
        "(a signed SendGrid Event Webhook, each reply as RFC 822 to the inbound hook, classified by the service), with "
        "the world's delays (hours to ten days, heavy-tailed: a later reaction comes in the week it falls in); then a run "
        f"of {wk['weekly_iterations']} iterations continued from the deployment (`init_from`, `feedback_source: "
        "outcomes`) learns from every outcome so far and its last policy is deployed. Everything goes through the API "
        "in process. Each seed's market scores every email by its reader's **positive-reply probability** (an "
        "interested or meeting reply, given delivery), read only by the benchmark; **the rule** (`bench/heuristic.py`, "
        "no learning) writes to the same prospects. Intervals are 90 % over resamples of the seeds. Each seed was "
        "measured on commit " + ", ".join(sorted({f"`{s['commit']}`" for s in seeds}))
        + " (" + ", ".join(f"{s['seconds'] / 60:.0f}" for s in seeds) + f" minutes per seed; {wk['workers']} workers); "
        "load average " + "/".join(f"{x:.1f}" for x in wk["load_average_after"]) + " as it ended. `bench/weekly.py` "
        "says how each figure is made, and where the service's clock differs from a team's.",
        "",
        *([f"**Measured at reduced sizes** ({n} seeds, {last} weeks, {sizes['sends']:,} sends a week): the target is "
           "set for 10 seeds, 8 weeks and 2,000 sends a week, so the verdicts below hold for these sizes only. "
           "`python -m bench weekly` measures the full sizes.", ""]
          if n < 10 or last != 8 or sizes["sends"] != 2000 else []),
        "| week | the deployment's drafts | the rule, same prospects | realised (positive replies ÷ delivered) | "
        "look-alikes: drafts / rule | unseen: drafts / rule | replies arrived by the week's end | median words |",
        "|---|---|---|---|---|---|---|---|",
        *[f"| {w + 1} | {percent(x['world'])} ({_interval(x['world_interval_90'], '.2%')}) | {percent(x['rule'])} | "
          f"{percent(x['realised'])} | {percent(x['by_kind']['look_alikes']['world'])} / "
          f"{percent(x['by_kind']['look_alikes']['rule'])} | {percent(x['by_kind']['unseen']['world'])} / "
          f"{percent(x['by_kind']['unseen']['rule'])} | {x['arrived_by_week_end']:.0%} | {x['words']:.0f} |"
          for w, x in enumerate(weeks)],
        "",
        "Per seed, the deployment's drafts by week: " + "; ".join(
            f"{s['seed']}: " + ", ".join(percent(w["world"]) for w in s["weeks"]) for s in seeds) + ".",
        "",
        f"- Week {last} over week 1: {rise:.2f}× ({_interval(wk['last_over_first_interval_90'])}; per seed "
        + ", ".join(f"{r:.2f}" for r in wk["last_over_first_per_seed"])
        + f") (target ≥ {WEEKLY_RISE_TARGET:g}×): {_ok(rise >= WEEKLY_RISE_TARGET)}.",
        f"- Week {last} against the rule on the same prospects: {percent(weeks[-1]['world'])} against "
        f"{percent(weeks[-1]['rule'])}, {over_rule:.2f}× ({_interval(wk['last_over_rule_interval_90'])}) (target: "
        f"above the rule): {_ok(over_rule > 1)}"
        + ("" if wk["last_over_rule_interval_90"][0] > 1 or over_rule <= 1 else "; the interval holds 1") + "; in "
        f"week 1, {wk['first_over_rule']:.2f}× the rule.",
        f"- Week {last}'s prospects drafted (never sent) by policies that learned nothing from the sends: the untrained "
        f"policy {percent(wk['last_untrained'])} (week {last}'s deployment {wk['last_over_untrained']:.2f}× it, "
        f"{_interval(wk['last_over_untrained_interval_90'])}); week 1's deployment {percent(wk['last_week_1_policy'])} "
        f"(week {last}'s {wk['last_over_week_1_policy']:.2f}× it, {_interval(wk['last_over_week_1_policy_interval_90'])}"
        "): what the weeks of outcomes added on the same prospects.",
        "",
    ]
    return lines


def world_section(wd: dict) -> list[str]:
    """Learning in the simulated world: the demo, transfer to unseen industries (and look-alikes), the judge."""
    sizes, seeds = wd["sizes"], wd["per_seed"]
    n = len(seeds)
    percent = lambda x: f"{x:.2%}"  # noqa: E731
    lines = [
        f"## {TITLES['world']}",
        "",
        f"{n} seeds, each one run of the demo as `codreamer run --iterations {sizes['iterations']}` runs it (every scenario, "
        "K = 4, the demo's simulated provider sending each published email to the world's readers, whose replies are the "
        "run's outcomes), through the API in process. Each seed's market (`app.simulation.readers.Market(seed)`) scores "
        "every email by its reader's **positive-reply probability** (an interested or meeting reply), which only this "
        "benchmark reads. Three writers on the same prospects: the run's last policy (**trained**), its iteration-0 "
        "policy (**untrained**), and **the rule**, no learning (`bench/heuristic.py`: the embedded composer handed the "
        "two facts whose words best match the prospect's pains, formal, medium length, a meeting ask). Intervals are "
        f"90 % over resamples of the seeds. Each seed was measured on commit "
        + ", ".join(sorted({f"`{s['commit']}`" for s in seeds}))
        + f" ({', '.join(str(s['run_s']) for s in seeds)} s per seed's run; {wd['workers']} workers); load average "
        + "/".join(f"{x:.1f}" for x in wd["load_average_after"]) + " as it ended. `bench/world.py` says how each "
        "figure is made.",
        "",
        *([f"**Measured at reduced sizes** ({n} seeds, {sizes['iterations']} iterations a run, {sizes['unseen']} unseen "
           f"prospects and {sizes['look_alikes']} look-alikes a seed): the targets are set for 10 seeds and the demo's 10 "
           "iterations, so every verdict below holds for these sizes only. `make bench` measures the full sizes.", ""]
          if n < 10 or sizes["iterations"] != 10 else []),
        "### Transfer to unseen industries",
        "",
        f"{sizes['unseen']} prospects per seed from industries and roles absent from every training scenario "
        f"(`unseen_prospects(seed, {sizes['unseen']})`, pains in their own words), and, reported apart, "
        f"{sizes['look_alikes']} look-alikes of the demo's scenarios (`look_alikes`). Mean positive-reply probability "
        "of each writer's emails:",
        "",
        "| prospects | trained | the rule | untrained | trained ÷ rule (target ≥ 1.1, interval above 1) | "
        "trained ÷ untrained (target ≥ 1.3) | median words: trained, rule, untrained |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, label in (("unseen", "unseen industries"), ("look_alikes", "look-alikes (apart)")):
        t = wd["transfer"][split]
        target = split == "unseen"
        over_rule = (f"{t['trained_over_heuristic']:.2f} ({_interval(t['trained_over_heuristic_interval_90'])})"
                     + (f", {_ok(t['trained_over_heuristic'] >= 1.1 and t['trained_over_heuristic_interval_90'][0] > 1)}"
                        if target else ""))
        over_untrained = (f"{t['trained_over_untrained']:.2f} ({_interval(t['trained_over_untrained_interval_90'])})"
                          + (f", {_ok(t['trained_over_untrained'] >= 1.3)}" if target else ""))
        w = t["words"]
        lines.append(f"| {label} | {percent(t['trained'])} ({_interval(t['trained_interval_90'], '.2%')}) | "
                     f"{percent(t['heuristic'])} ({_interval(t['heuristic_interval_90'], '.2%')}) | "
                     f"{percent(t['untrained'])} ({_interval(t['untrained_interval_90'], '.2%')}) | {over_rule} | "
                     f"{over_untrained} | {w['trained']:.0f}, {w['heuristic']:.0f}, {w['untrained']:.0f} |")
    lines += [
        "",
        "Per seed, unseen industries (trained / rule / untrained): " + "; ".join(
            f"{s['seed']}: {percent(s['transfer']['unseen']['trained'])} / {percent(s['transfer']['unseen']['heuristic'])} / "
            f"{percent(s['transfer']['unseen']['untrained'])}" for s in seeds) + ".",
        "",
    ]
    d = wd["demo"]
    rise = (f"The run's mean reward (the judge blended with the outcomes it received, as `codreamer run` shows it), mean "
            f"of the last {wd['late']} iterations over iteration 1, per seed: "
            + ", ".join(f"{r:.2f}" for r in d["reward_ratio_per_seed"])
            + f". **≥ 1.2× in {d['seeds_at_1_2']} of {n} seeds** (target: at least 9 of 10): "
            f"{_ok(d['seeds_at_1_2'] >= math.ceil(0.9 * n))}; mean {d['reward_ratio_mean']:.2f} "
            f"({_interval(d['reward_ratio_interval_90'])}).")
    if sizes["iterations"] <= wd["late"]:
        rise = (f"**The rise was not measured**: it compares the last {wd['late']} iterations with the first, and these "
                f"runs had {sizes['iterations']}.")
    lines += [
        "### The demo",
        "",
        rise,
        f"- Median length of the published emails (iterations 1–{sizes['iterations']}, every seed): "
        f"{d['median_published_words']:.0f} words (target ≤ 150): {_ok(d['median_published_words'] <= 150)}.",
        f"- What the world makes of the published emails to the target prospect: untrained (iteration 0) "
        f"{percent(d['world_untrained'])}, the last {wd['late']} iterations {percent(d['world_late'])} "
        f"({_interval(d['world_late_interval_90'], '.2%')}), the rule's email to the same prospect {percent(d['world_rule'])}.",
        "",
    ]
    j = wd["judge"]
    traits = j["traits"]
    names = {"relevance": "pains answered, weighted by how much they matter to the reader and what persuades them",
             "ask": "the ask (the one the reader answers, another, several, none)",
             "length": "the penalty for running past the reader's tolerance", "hollow": "generic claims",
             "off_industry": "facts about other industries", "names": "repeated names", "wrong": "a wrong name or company",
             "words": "length in words"}
    lines += [
        "### The judge against the world",
        "",
        f"Spearman between the embedded judge's score (`app/backends/embedded/judge.py`) and the world's positive-reply "
        f"probability over every candidate email of the run (at least {j['candidates_min']} per seed), per seed: "
        + ", ".join("n/a" if r is None else f"{r:.2f}" for r in j["spearman_per_seed"])
        + f". **≥ 0.3 in {j['seeds_at_0_3']} of {n} seeds** (target: 8 of 10): {_ok(j['seeds_at_0_3'] >= math.ceil(0.8 * n))}"
        + (f"; median {j['spearman_median']:.2f}." if j["spearman_median"] is not None else "."),
        "",
        "What the world's readers weigh (each term of a reader's impression, `app.simulation.readers.Impression`, read "
        "only here; a penalty is 0 at best and negative otherwise, so a positive ρ means the world's probability falls "
        "as the penalty grows) against what the judge follows: median Spearman over seeds of each term with the world's "
        "probability and with the judge's score (— where the term did not vary).",
        "",
        "| the email's | with the world's probability | with the judge's score |",
        "|---|---|---|",
        *[f"| {names[name]} | {_plain(v['world'], '+.2f')} | {_plain(v['judge'], '+.2f')} |" for name, v in traits.items()],
        "",
        *_unread(traits, names),
        "",
    ]
    return lines


PENALTIES = ("length", "hollow", "off_industry", "names", "wrong")  # impression terms that are ≤ 0: 0 is best


def _unread(traits: dict, names: dict) -> list[str]:
    """What the judge should read that it does not: each term the world's probability follows (|ρ| ≥ 0.1) where the
    judge's score follows it less or the other way (a difference of 0.2 or more), and each the judge follows
    (|ρ| ≥ 0.2) that the world does not (|ρ| < 0.1). A penalty term's ρ is read the other way round: the world's
    probability follows the penalty's size down."""
    said = []
    for name, v in traits.items():
        world, judge = v["world"], v["judge"]
        if world is None or judge is None or abs(world - judge) < 0.2:
            continue
        sign = -1 if name in PENALTIES else 1
        way = lambda rho: "rises" if sign * rho > 0 else "falls"  # noqa: E731
        what = names[name].removeprefix("the penalty for ")
        if abs(world) >= 0.1:
            said.append(f"- The world's probability {way(world)} with {what} (ρ {world:+.2f}); the judge's score "
                        + (f"{way(judge)} with it too, less (ρ {judge:+.2f})." if judge * world > 0 and abs(judge) >= 0.1
                           else f"does not (ρ {judge:+.2f})."))
        elif abs(judge) >= 0.2:
            said.append(f"- The judge's score {way(judge)} with {what} (ρ {judge:+.2f}); the world's probability does not "
                        f"(ρ {world:+.2f}).")
    return said or ["- None of these terms separates the judge from the world by 0.2 or more."]


def fairness_section(fa: dict) -> list[str]:
    """Fair queues (a noisy tenant beside a quiet one, dead webhooks) and the database outage drill."""
    lines = [
        f"## {TITLES['fairness']}",
        "",
        f"Load average (1 min) {fa['load_average_before']} before, {fa['load_average_after']} after. "
        "`python -m bench fairness` (bench/fairness.py); every request through the HTTP API of real processes.",
        "",
    ]
    if no := fa.get("noisy"):
        quiet, dead = no["quiet"], no["dead_webhooks"]
        lines += [
            "**A noisy tenant** (PostgreSQL, `serve` API-only and two `codreamer worker` processes, default settings): "
            f"Alice asked for {no['batches']['asked']} batches of {no['batches']['size']:,} prospects and "
            f"{no['evaluations']['asked']} evaluations in {no['asked_s']} s; {no['batches']['accepted']} batches and "
            f"{no['evaluations']['accepted']} evaluations were queued, {no['batches']['refused_429']} and "
            f"{no['evaluations']['refused_429']} refused with 429.",
            "",
            f"- Bob's one-prospect batch: {quiet['status']} {quiet['seconds']:.1f} s after its request "
            "(target ≤ 10 s), "
            f"while {quiet['alices_still_active']} of Alice's batches and evaluations were still queued or running: "
            f"{_ok(quiet['status'] == 'succeeded' and quiet['seconds'] <= 10 and quiet['alices_still_active'] > 0)}.",
            f"- Behind two one-prospect batches whose webhook is a closed loopback port: "
            f"{dead['behind_two_dead_s']:.1f} s, against {dead['alone_s']:.1f} s alone (target ≤ 5 s later; the two "
            f"ended {', '.join(dead['dead_batches'])}): "
            f"{_ok(dead['status'] == 'succeeded' and dead['behind_two_dead_s'] - dead['alone_s'] <= 5)}.",
            "",
        ]
    if out := fa.get("outage"):
        rounds = out["rounds"]
        good = sum(r["exactly_once"] and all(e == "succeeded" for e in r["evaluations"]) for r in rounds)
        lines += [
            f"**The outage drill**: `serve` on a PostgreSQL cluster of its own; each round a batch of {out['count']} "
            f"prospects and {out['evaluations']} evaluations, the cluster stopped for {out['stop_s']:g} s once the "
            "batch had drafted some, then started; nothing resumed by hand.",
            "",
            "| round | drafted before the stop | batch | drafted (emails, distinct refs) | evaluations | stopped s | "
            "ended s after the restart |",
            "|---|---|---|---|---|---|---|",
            *[f"| {n} | {r['drafted_before_stop']} | {r['batch_status']} | {r['completed']} ({r['emails']}, "
              f"{r['distinct_refs']}) of {r['prospects']} | {', '.join(r['evaluations'])} | {r['stopped_s']} | "
              f"{r['recovered_s']} |" for n, r in enumerate(rounds, 1)],
            "",
            f"- {good} of {len(rounds)} rounds: the batch succeeded with every prospect drafted exactly once and every "
            f"evaluation succeeded (target 10 of 10): {_ok(good == len(rounds) == 10)}.",
            "",
        ]
    return lines


def _points(pair: dict, scale: float = 100, fmt: str = ".2f", sign: str = "") -> str:
    """A mean and its 90 % interval, as percentages (`scale` 100) or points."""
    return (f"{pair['mean'] * scale:{sign}{fmt}} [{pair['low'] * scale:{sign}{fmt}}, "
            f"{pair['high'] * scale:{sign}{fmt}}]").replace("-", "−")


def reply_interest_section(ri: dict) -> list[str]:
    """Learning from what replies meant (bench/reply_interest.py): interest values against raw reply counts."""
    summary, paired, markets = ri["summary"], ri["paired"], ri["markets"]
    per_market = [1 - m["interest"]["unsubscribe"] / m["raw"]["unsubscribe"] for m in markets]
    n = len(markets)
    mean = sum(per_market) / n
    half = 1.833 * math.sqrt(sum((x - mean) ** 2 for x in per_market) / (n - 1)) / math.sqrt(n) if n == 10 else None
    met = (paired["positive_difference"]["mean"] >= 0 and ri["unsubscribe_reduction"] >= 0.3)
    sends = ri["sends_per_learner_per_market"]
    lines = [
        f"## {TITLES['reply_interest']}",
        "",
        f"`python -m bench.reply_interest` (bench/reply_interest.py; raw numbers in bench/reply_interest.json), "
        f"{ri['seconds']:.0f} s.",
        "",
        "Two learners choose, round after round, which of six candidate emails to send to each prospect's look-alike "
        "readers, by Thompson sampling on the service's outcome model; they differ only in what a reply is worth: the "
        "interest scale's defaults (`REPLY_INTEREST`: a meeting or an interested reply for, a not-interested or an "
        "unsubscribe against), or every reply that is not an out-of-office as a success (the service before replies "
        "were classified). `uniform` never learns. The candidates, written once before any run, are three plain ones "
        "answering the prospect's first pain (a question, a case study, a call), a pushy one (hollow claims, a shouted "
        "subject, four asks), an off-target one (another industry's story) and a long generic one. Each send draws its "
        "reply kind from the world's probabilities for that reader; bounces and out-of-office notices, which neither "
        f"learner counts, are left out. {ri['seeds']} markets (seeds 0–{ri['seeds'] - 1}), {ri['prospects']} unseen "
        f"prospects each with {ri['readers']} look-alike readers, {ri['rounds']} rounds of "
        f"{sends // (ri['rounds'] * ri['prospects'])} sends per prospect ({sends:,} sends per learner per market). "
        "Scored by the world's truth over each prospect's readers for the candidate each learner ends up rating best; "
        f"90 % t-intervals over the {ri['seeds']} markets.",
        "",
        "| learner | positive-reply rate (interested or meeting) | unsubscribe rate |",
        "|---|---|---|",
        *[f"| {label} | {_points(summary[key]['positive'])} % | {_points(summary[key]['unsubscribe'], fmt='.3f')} % |"
          for key, label in (("interest", "interest values"), ("raw", "raw reply rate"),
                             ("uniform", "uniform (no learning)"))],
        "",
        "Paired over the markets, interest − raw: positive-reply rate "
        f"{_points(paired['positive_difference'], sign='+')} points, unsubscribe rate "
        f"{_points(paired['unsubscribe_difference'], fmt='.3f', sign='+')} points; the unsubscribe rate is "
        f"{ri['unsubscribe_reduction']:.0%} lower (per market {min(per_market):.0%}–{max(per_market):.0%}"
        + (f", mean {mean:.0%} [{mean - half:.0%}, {mean + half:.0%}]" if half is not None else "")
        + "). Target (positive-reply rate at least as high, unsubscribe rate at least 30 % lower): "
        f"{'met' if met else '**missed**'}. " + _reply_interest_endings(ri),
        "",
    ]
    return lines


CANDIDATES = {"plain": (0, 1, 2), "pushy": (3,), "off-target": (4,), "long generic": (5,)}  # bench/reply_interest.py


def _reply_interest_endings(ri: dict) -> str:
    """Which candidate each learner ended on, and each candidate's true rates averaged over every reader."""
    markets = ri["markets"]
    finals = {learner: [k for m in markets for k in m[learner]["final"]] for learner in ("interest", "raw")}

    def rate(metric: str, kinds: tuple[int, ...]) -> str:
        values = sorted({f"{sum(m['candidates'][metric][k] for m in markets) / len(markets):.2%}".rstrip("%")
                         for k in kinds})
        return "–".join(dict.fromkeys((values[0], values[-1]))) + " %"

    return (f"The raw learner ended on the pushy email for {sum(k in CANDIDATES['pushy'] for k in finals['raw'])} of "
            f"the {len(finals['raw'])} prospects (its unsubscribes count as replies); the interest learner on a plain "
            f"one for {sum(k in CANDIDATES['plain'] for k in finals['interest'])}. The candidates' true rates, "
            "averaged over every reader: " + ", ".join(f"{name} {rate('positive', kinds)} positive and "
                                              f"{rate('unsubscribe', kinds)} unsubscribe"
                                              for name, kinds in CANDIDATES.items()) + ".")
