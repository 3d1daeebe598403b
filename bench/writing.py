"""Drafts a salesperson would send (issue 52): 30 prospects of our own, on the demo graph and on a second graph.

`bench/writing_data/prospects.json` holds 30 prospects as a CRM exports them (14+ industries, a third unlike any
training scenario of either graph, names from a dozen cultures, honorifics and "Last, First"), each labelled by hand
with the greeting a person would accept, the pricing, integration and case-study nodes its pains call for on each
graph, and the fit a salesperson would give. `bench/writing_data/sensors_graph.json` is the second graph: an
industrial-sensors vendor with pricing, integrations and case studies.

Per graph and training seed, a run (embedded backend, the judge alone) trains on the graph's scenarios; its untrained
policy (`@0`) and its last one draft all 30 prospects through `POST /drafts`. Every check below is this file's own
(none calls the composer, the judge or `app.agent`):

- greetings: the first line greets by a name the label accepts, or by none where the label says no name is sure;
- pasted or ungrammatical: the prospect's own "we"/"our" after a preposition, a pain written as a clause pasted after
  a preposition, a verb after "Our", a/an before the wrong sound, a doubled word, a sentence in lower case, "…",
  a subject over 60 characters, a bare honorific greeting, the seller's name in lower case;
- calls for: the share of (prospect, node) pairs labelled "called for" whose node the draft cites;
- off-pain pitch: a cited fact (not the company, a persona or an industry) that shares no content word with any of
  the prospect's pains and is no price for a cost pain;
- the reader: the world's reader (`app.simulation`, branch `world`), P(positive reply) of each email in 10 markets,
  and a rubric of our own (answers each stated pain with a concrete detail, stays on topic, ≤ 150 words, one ask).

`python -m bench.writing` (about 15 minutes on 2 cores) writes its section of bench/RESULTS.md and
bench/writing_results.json.
"""

import asyncio
import json
import os
import re
import statistics
import tempfile
from pathlib import Path

import numpy as np

from bench import machine
from bench.report import provenance, write_own_section

HERE = Path(__file__).parent
DATA = HERE / "writing_data"
SEEDS = int(os.environ.get("WRITING_SEEDS", "2"))
ITERATIONS = int(os.environ.get("WRITING_ITERATIONS", "4"))
MARKETS = 10
DEMO_SENDER = {"name": "Jordan Ellis", "title": "Account Executive"}  # the demo graph has none: the batch names one

_WORD = re.compile(r"[a-zà-ÿ0-9]+")
_STOP = set("the and for with that this from your you our are was were have has into over than then they them their "
            "what when which who will would can not per each every more less very just about only also its it's "
            "been being does make made take takes need needs want wants".split())
_COST = set("cost costs price prices pricing budget opex capex spend spending expensive capex roi bill bills".split())
_CLAUSE_VERBS = set("cost costs eat eats take takes drive drives fail fails break breaks is are lose loses stall stalls "
                    "stop stops want wants limit limits go goes doubled lag lags oversell need needs".split())
_CONTEXT = ("company", "persona", "industry", "segment", "overview")


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if len(w) > 3 and w not in _STOP}


def sentences_of(body: str) -> list[str]:
    return [s.strip() for line in body.splitlines() for s in re.split(r"(?<=[.!?])\s+", line) if s.strip()]


# ---------------------------------------------------------------- the checks


def greeting_broken(body: str, accepted: list[str]) -> str | None:
    first = body.strip().splitlines()[0].strip() if body.strip() else ""
    name = re.sub(r"^(?:dear|hi|hello|good morning)\b", "", first, flags=re.I).strip().rstrip(",:").strip()
    name = "" if name.lower() == "there" else name
    if not accepted:
        return None if not name else f"greets {name!r} where no name is sure"
    return None if name in accepted else f"greets {name!r}, not {' or '.join(accepted)}"


def writing_problems(subject: str, body: str, pains: list[str], seller: str) -> list[str]:
    problems = []
    text = f"{subject}\n{body}"
    if "…" in text:
        problems.append("an ellipsis")
    if len(subject) > 60:
        problems.append(f"subject of {len(subject)} characters")
    if re.search(r"\b(?:at|on|to|with|up|of|about)\s+(?:we|our|I)\b", body):
        problems.append("the prospect's own 'we/our' pasted")
    low = body.lower()
    for pain in pains:
        words = pain.lower().split()
        if any(w in _CLAUSE_VERBS for w in words[1:]):
            for m in re.finditer(re.escape(pain.lower().rstrip(".")), low):
                before = low[: m.start()].split()[-1:] or [""]
                if before[0] in ("at", "on", "with", "about", "to", "up", "of", "that"):
                    problems.append(f"clause pasted after {before[0]!r}: {pain!r}")
    if m := re.search(r"\bOur [a-z]+s [a-z]+", body):
        if m.group(0).split()[1] not in ("results", "customers", "sensors", "plans", "integrations", "features"):
            problems.append(f"a verb after 'Our': {m.group(0)!r}")
    for article, word in re.findall(r"\b(a|an) ([a-z][a-z-]*)", body):
        vowel = word[0] in "aeiou" and not word.startswith(("uni", "use", "usu", "one", "eu"))
        if (article == "a") == vowel and not word.startswith(("hour", "honest")):
            problems.append(f"'{article} {word}'")
    if m := re.search(r"\b(\w+) \1\b", body, re.I):
        problems.append(f"doubled {m.group(0)!r}")
    for s in sentences_of(body):
        if s[:1].islower():
            problems.append(f"lower-case start {s[:25]!r}")
    if re.search(r"^(?:Dear|Hi)?\s*(?:Dr|Mr|Mrs|Ms|Prof)\.?,", body.strip(), re.M):
        problems.append("a bare honorific greeting")
    if seller and seller.lower() in body and seller not in body.replace(seller.lower(), ""):
        problems.append("the seller's name in lower case")
    return problems


def seller_clauses(body: str, seller: str) -> tuple[int, bool]:
    """Sentences that introduce the seller, and whether the first sentence after the greeting is about the reader."""
    said = sentences_of("\n".join(body.strip().splitlines()[1:]))
    intro = sum(bool(re.match(r"(?:I am writing from|I'm with|I work at|I'm \w+ from)\b", s)) for s in said)
    return intro, bool(said) and seller not in said[0]


def off_pain(node: dict, pains: list[str], called: list[str]) -> bool:
    if any(w in node["type"].lower() for w in _CONTEXT) or node["id"] in called:
        return False
    mine = content(" ".join(pains))
    if content(f"{node['title']} {node['text']}") & mine:
        return False
    return not ("pric" in node["type"].lower() and mine & _COST)


def rubric(subject: str, body: str, pains: list[str], role: str, industry: str) -> dict:
    """Our own reader: each stated pain answered by a sentence that shares its words and carries a concrete detail
    (a figure or a named customer), sentences on topic, at most 150 words, exactly one question."""
    said = sentences_of("\n".join(body.strip().splitlines()[1:-3]))
    concrete = [s for s in said if re.search(r"\d", s) or re.search(r"[a-z]\s+[A-Z][a-z]+ [A-Z][a-z]+", s)]
    answered = [any(content(p) & content(s) for s in concrete) for p in pains] or [False]
    topic = content(" ".join(pains) + f" {role} {industry}")
    on_topic = [bool(content(s) & topic) or s.endswith("?") for s in said] or [False]
    n = len(body.split())
    parts = {"answers": float(np.mean(answered)), "on_topic": float(np.mean(on_topic)),
             "length": 1.0 if n <= 150 else max(0.0, 1 - (n - 150) / 150), "one_ask": float(body.count("?") == 1)}
    return parts | {"score": float(np.mean(list(parts.values())))}


# ---------------------------------------------------------------- running it


async def _draft(client, graph_id: str, policy: str, prospects: list[dict], sender: dict | None) -> list[dict]:
    from bench.drafts import _ok

    body = {"graph_id": graph_id, "policy": policy, "prospects": prospects} | ({"sender": sender} if sender else {})
    created = await _ok(await client.post("/drafts", json=body), 202)
    while (batch := await _ok(await client.get(created["links"]["self"])))["status"] not in ("succeeded", "failed"):
        await asyncio.sleep(0.2)
    assert batch["status"] == "succeeded", batch
    return (await _ok(await client.get(created["links"]["drafts"], params={"limit": 200})))["data"]


async def _collect(workdir: Path, keep: Path) -> dict:
    """Seed by seed (each graph's run and its drafts), kept in `keep` after each, so an interrupted benchmark still
    has every seed it finished."""
    from app.knowledge_graph.service import demo_document
    from bench.drafts import learn, service

    prospects = json.loads((DATA / "prospects.json").read_text())
    sensors = json.loads((DATA / "sensors_graph.json").read_text())
    documents = {"demo": demo_document().model_dump(mode="json"), sensors["id"]: sensors}
    requests = [{k: v for k, v in p.items() if k != "bench"} for p in prospects]
    out = {"graphs": {g: {"document": d, "runs": []} for g, d in documents.items()}, "prospects": prospects,
           "machine": machine()}
    async with service(workdir) as api:
        client = api.http
        assert (await client.post("/graphs", json=sensors)).status_code == 201
        for seed in range(SEEDS):
            for graph_id in documents:
                run = await learn(client, {"graph_id": graph_id, "iterations": ITERATIONS, "rollouts_per_group": 4,
                                           "max_turns": 6, "feedback_source": "none", "seed": seed})
                sender = DEMO_SENDER if graph_id == "demo" else None
                drafted = {label: await _draft(client, graph_id, f"{run['run_id']}@{k}", requests, sender)
                           for label, k in (("untrained", 0), ("trained", ITERATIONS))}
                out["graphs"][graph_id]["runs"].append({"seed": seed, "run_id": run["run_id"], "drafts": drafted})
                keep.write_text(json.dumps(out, ensure_ascii=False))
                print(f"{graph_id} seed {seed}: drafted", flush=True)
    return out


def _interval(values: list[float], rng: np.random.Generator) -> tuple[float, float]:
    if not values:
        return (float("nan"), float("nan"))
    means = [float(np.mean(rng.choice(values, len(values)))) for _ in range(2000)]
    return float(np.percentile(means, 5)), float(np.percentile(means, 95))


def evaluate(collected: dict) -> dict:
    from app.simulation.people import SimulatedProspect
    from app.simulation.readers import Market, Received

    markets = [Market(seed) for seed in range(MARKETS)]
    prospects = {p["id"]: p for p in collected["prospects"]}
    rng = np.random.default_rng(0)
    result = {}
    for graph_id, graph in collected["graphs"].items():
        nodes = {n["id"]: n for n in graph["document"]["nodes"]}
        seller = max((n for n in graph["document"]["nodes"] if "company" in n["type"].lower()),
                     key=lambda n: sum(n["id"] in (e["source"], e["target"]) for e in graph["document"]["edges"]))["title"]
        per = {}
        for label in ("untrained", "trained"):
            rows = []
            for run in graph["runs"]:
                for d in run["drafts"][label]:
                    p = prospects[d["prospect"]["id"]]
                    labels = p["bench"]
                    called = labels["calls_for"][graph_id]
                    email = d["email"]
                    row = {"seed": run["seed"], "id": p["id"], "unlike": labels["unlike"], "fit": d["fit"],
                           "fit_expected": labels["fit"][graph_id], "called": called}
                    if email is None:
                        rows.append(row | {"email": None})
                        continue
                    subject, body = email["subject"], email["body"]
                    formal = next((g for g in labels["greet"] if "." in g.split()[0]), "")
                    who = SimulatedProspect(
                        email=p.get("email") or f"{p['id']}@example.org", first_name=(labels["greet"] or [""])[0],
                        last_name=p.get("last_name") or (formal.split()[-1] if formal else ""), company=d["prospect"]["company"],
                        role=d["prospect"]["role"] or "", industry=d["prospect"]["industry"] or "",
                        pains=tuple(p["pains"]), goal=d["prospect"]["goal"] or "",
                        base="unseen" if labels["unlike"] else "near")
                    signer = DEMO_SENDER["name"] if graph_id == "demo" else graph["document"]["sender"]["name"]
                    received = Received(subject=subject, body=body, sender=f"{signer} <sales@example.com>")
                    world = float(np.mean([m.reader(who).positive_reply_probability(received) for m in markets]))
                    intro, about_reader = seller_clauses(body, seller)
                    rows.append(row | {
                        "email": {"subject": subject, "body": body, "citations": email["citations"]},
                        "greeting": greeting_broken(body, labels["greet"]),
                        "problems": writing_problems(subject, body, p["pains"], seller),
                        "seller_intros": intro, "opens_on_reader": about_reader,
                        "cited_called": [n for n in called if n in email["citations"]],
                        "off_pain": [c for c in email["citations"] if c in nodes and off_pain(nodes[c], p["pains"], called)],
                        "words": len(body.split()), "world": world,
                        "rubric": rubric(subject, body, p["pains"], d["prospect"]["role"] or "", d["prospect"]["industry"] or "")})
            written = [r for r in rows if r["email"]]
            pairs = [(r, n) for r in written for n in r["called"]]
            unlike = [r for r in written if r["unlike"]]
            per[label] = {
                "drafts": len(rows), "written": len(written),
                "broken_greetings": sum(bool(r["greeting"]) for r in written),
                "greeting_examples": sorted({r["greeting"] for r in written if r["greeting"]})[:5],
                "writing_problems": sum(bool(r["problems"]) for r in written),
                "problem_examples": sorted({x for r in written for x in r["problems"]})[:8],
                "more_than_one_seller_intro": sum(r["seller_intros"] > 1 for r in written),
                "not_opening_on_reader": sum(not r["opens_on_reader"] for r in written),
                "called_pairs": len(pairs), "called_cited": sum(n in r["cited_called"] for r, n in pairs),
                "called_nodes_never_cited": sorted({n for r, n in pairs} - {n for r in written for n in r["cited_called"]}),
                "off_pain_drafts": sum(bool(r["off_pain"]) for r in written),
                "off_pain_examples": sorted({f"{r['id']}: {c}" for r in written for c in r["off_pain"]})[:6],
                "fit_agreement": sum(r["fit"] == r["fit_expected"] for r in rows) / len(rows),
                "low_fit": sum(r["fit"] == "low" for r in rows),
                "median_words": statistics.median(r["words"] for r in written) if written else None,
                "world_unlike": float(np.mean([r["world"] for r in unlike])) if unlike else None,
                "world_unlike_90": _interval([r["world"] for r in unlike], rng),
                "world_all": float(np.mean([r["world"] for r in written])) if written else None,
                "rubric_unlike": float(np.mean([r["rubric"]["score"] for r in unlike])) if unlike else None,
                "rubric_unlike_90": _interval([r["rubric"]["score"] for r in unlike], rng),
                "rubric_all": float(np.mean([r["rubric"]["score"] for r in written])) if written else None,
                "rows": rows,
            }
        trained, untrained = per["trained"], per["untrained"]
        paired = [(t["world"], u["world"]) for t, u in zip(trained["rows"], untrained["rows"], strict=True)
                  if t.get("email") and u.get("email") and t["unlike"]]
        diffs = [t - u for t, u in paired]
        per["trained_minus_untrained_world_unlike"] = float(np.mean(diffs)) if diffs else None
        per["trained_minus_untrained_world_unlike_90"] = _interval(diffs, rng)
        result[graph_id] = per
    return result


def _examples(result: dict, collected_ids: list[str]) -> list[str]:
    lines = []
    for graph_id, per in result.items():
        rows = {r["id"]: r for r in per["trained"]["rows"] if r["seed"] == 0}
        for pid in collected_ids:
            r = rows.get(pid)
            if r is None:
                continue
            lines += [f"**{graph_id}, trained, prospect {pid}** (fit {r['fit']}):", ""]
            if r["email"] is None:
                lines += ["(no email)", ""]
                continue
            lines += ["```", f"Subject: {r['email']['subject']}", "", r["email"]["body"], "```", ""]
    return lines


def section(result: dict, meta: dict) -> str:
    lines = ["## Drafts a salesperson would send: facts, names, pains, sender, fit (issue 52)", "",
             provenance(meta), "",
             "Reproduce with `python -m bench.writing` (raw numbers: `bench/writing_results.json`).", "",
             f"30 prospects of our own (`bench/writing_data/prospects.json`: 25 industries, 10 unlike any scenario of "
             f"either graph, names from a dozen cultures, honorifics and \"Last, First\"), drafted on the demo graph and "
             f"on a second graph (`bench/writing_data/sensors_graph.json`, an industrial-sensors vendor) by a run's "
             f"untrained policy (`@0`) and its last one (`@{meta['iterations']}`: {meta['iterations']} iterations × 4 "
             "rollouts, embedded "
             f"backend, the judge alone), {meta['seeds']} training seed(s). Every check is the benchmark's own "
             f"(`bench/writing.py`); none calls the composer or the judge.", "",
             "| graph | policy | drafts | broken greetings | pasted/ungrammatical | >1 seller clause | not opening on the "
             "reader | called-for nodes cited | drafts pitching an off-pain fact | fit = label | median words | world "
             "reader, unlike (90%) | own rubric, unlike (90%) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for graph_id, per in result.items():
        for label in ("untrained", "trained"):
            m = per[label]
            wl, wh = m["world_unlike_90"]
            rl, rh = m["rubric_unlike_90"]
            lines.append(
                f"| {graph_id} | {label} | {m['written']}/{m['drafts']} | {m['broken_greetings']} | {m['writing_problems']} | "
                f"{m['more_than_one_seller_intro']} | {m['not_opening_on_reader']} | {m['called_cited']}/{m['called_pairs']} | "
                f"{m['off_pain_drafts']} | {m['fit_agreement']:.0%} | {m['median_words']} | "
                f"{m['world_unlike']:.4f} ({wl:.4f}–{wh:.4f}) | {m['rubric_unlike']:.3f} ({rl:.3f}–{rh:.3f}) |")
    lines.append("")
    for graph_id, per in result.items():
        d, (lo, hi) = per["trained_minus_untrained_world_unlike"], per["trained_minus_untrained_world_unlike_90"]
        t, u = per["trained"], per["untrained"]
        lines.append(f"- {graph_id}: trained − untrained, world reader's P(positive reply) on the unlike prospects, "
                     f"paired per prospect and seed: {d:+.4f} (90% {lo:+.4f} to {hi:+.4f}); target trained ≥ untrained: "
                     f"{'met' if d is not None and d >= 0 else '**missed**'}. Called-for nodes never cited (trained): "
                     f"{', '.join(t['called_nodes_never_cited']) or 'none'}; (untrained): "
                     f"{', '.join(u['called_nodes_never_cited']) or 'none'}.")
        for label in ("untrained", "trained"):
            m = per[label]
            for key, name in (("greeting_examples", "greetings"), ("problem_examples", "writing problems"),
                              ("off_pain_examples", "off-pain citations")):
                if m[key]:
                    lines.append(f"  - {label} {name}: {'; '.join(m[key])}")
    lines += ["", "Emails quoted (seed 0, trained):", ""]
    lines += _examples(result, ["w1", "w6", "d3", "u1", "u4", "d11"])
    return "\n".join(lines)


def main() -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ["WEAVE_DISABLED"] = "true"
    import app  # noqa: F401  (litellm offline)

    drafts = Path(os.environ.get("WRITING_DRAFTS", HERE / "writing_drafts.json"))
    if os.environ.get("WRITING_REUSE") and drafts.exists():  # the drafts already written (all seeds it finished)
        collected = json.loads(drafts.read_text())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            collected = asyncio.run(_collect(Path(tmp), drafts))
    meta = collected["machine"]
    seeds = min(len(g["runs"]) for g in collected["graphs"].values())
    for graph in collected["graphs"].values():
        graph["runs"] = graph["runs"][:seeds]
    meta["seeds"], meta["iterations"] = seeds, ITERATIONS
    result = evaluate(collected)
    (HERE / "writing_results.json").write_text(json.dumps({"machine": meta, "result": result}, indent=1, ensure_ascii=False))
    write_own_section(HERE / "RESULTS.md", "writing", section(result, meta))
    print(section(result, meta))


if __name__ == "__main__":
    main()
