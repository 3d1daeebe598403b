"""`python -m bench.replies`: the reply cutter and classifier measured over public corpora and the labelled replies;
writes the section "Replies: quoted history and categories" of bench/RESULTS.md.

- Quoted history: over tests/corpora/replies (five reply parsers' test suites), the share of messages whose kept
  text equals the expected visible text, whitespace-normalised, per source, language and format.
- Categories: per-category F1 and macro-F1 on the held-out labelled replies (and, apart, the development ones), the
  return dates of out-of-office replies, and every public delivery report or auto-reply (sisimai) read as a machine's.
- Speed: per reply, offline, the classifier alone and cutter plus classifier (p50, p99).
"""

import email
import email.policy
import json
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import bench
from app.outcomes import inbound
from app.outcomes.replies import Classification, ReplyCategory, classify_reply, own_text
from bench.report import provenance, write_own_section

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / "tests" / "corpora"
RESULTS = Path(__file__).parent / "RESULTS.md"
SECTION = "## Replies: quoted history and categories"  # under the marker <!-- section: replies -->
QUOTED_HISTORY_TARGET = 0.90
MACRO_F1_TARGET = 0.85
RECEIVED_AT = datetime(2026, 11, 20, 9, tzinfo=UTC)  # when a labelled reply came, unless it says otherwise
MACHINE = {ReplyCategory.bounce, ReplyCategory.auto_reply, ReplyCategory.out_of_office}


# ---------------------------------------------------------------- quoted history


@dataclass(frozen=True)
class CorpusReply:
    source: str
    file: str
    format: str  # txt, html or eml
    language: str
    client: str
    expected: str


def corpus_replies() -> list[CorpusReply]:
    return [CorpusReply(source=folder.name, **{k: v for k, v in case.items() if k != "note"})
            for folder in sorted((CORPORA / "replies").iterdir()) if (folder / "cases.json").exists()
            for case in json.loads((folder / "cases.json").read_text())]


def kept_text(reply: CorpusReply) -> str:
    """What the service keeps as the reply's own text: a raw message through the inbound parser, a body through
    `own_text`."""
    data = (CORPORA / "replies" / reply.source / reply.file).read_bytes()
    if reply.format == "eml":
        return inbound.parse_reply(data, domain="in.codreamer.test").text
    return own_text(data.decode("utf-8"), html=reply.format == "html")


def normalised(text: str) -> str:
    return " ".join(text.split())


def quoted_history() -> dict:
    tallies: dict[str, Counter] = defaultdict(Counter)
    failed = []
    for reply in corpus_replies():
        kept = normalised(kept_text(reply)) == normalised(reply.expected)
        for key in ("all", f"source:{reply.source}", f"language:{reply.language}", f"format:{reply.format}",
                    f"client:{reply.client}"):
            tallies[key]["kept"] += kept
            tallies[key]["total"] += 1
        if not kept:
            failed.append(f"{reply.source}/{reply.file}")
    return {"tallies": {key: dict(value) for key, value in tallies.items()}, "failed": failed}


# ---------------------------------------------------------------- categories


@dataclass(frozen=True)
class LabelledReply:
    category: ReplyCategory
    language: str
    text: str
    headers: dict[str, str]
    received_at: datetime
    returns_on: date | None
    public_file: str | None


def _message_parts(raw: bytes) -> tuple[dict[str, str], str]:
    """A raw message's header fields and its reply's own text, as the inbound parser reads them."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    headers = {}
    for name, value in message.items():
        try:
            headers[name] = str(value)
        except Exception:  # a header the stdlib cannot decode: the classifier goes without it
            headers[name] = ""
    try:
        part = message.get_body(preferencelist=("plain", "html"))
        body = part.get_content() if part is not None else ""
        html = part is not None and part.get_content_subtype() == "html"
    except Exception:  # an unknown charset, a broken encoding
        body, html = "", False
    return headers, own_text(body if isinstance(body, str) else "", html=html)


def labelled(which: str) -> list[LabelledReply]:
    """The labelled replies of tests/corpora/replies_labelled/`which`.txt (see its README)."""
    replies = []
    for block in (CORPORA / "replies_labelled" / f"{which}.txt").read_text().split("\n=== ")[1:]:
        head, _, body = block.partition("\n")
        category, language = head.split()
        headers, lines, public_file, returns_on, received_at = {}, [], None, None, RECEIVED_AT
        for line in body.split("\n"):
            if line.startswith("@file "):
                public_file = line.removeprefix("@file ").strip()
            elif line.startswith("@returns "):
                returns_on = date.fromisoformat(line.removeprefix("@returns ").strip())
            elif line.startswith("@received "):
                received_at = datetime.fromisoformat(line.removeprefix("@received ").strip()).replace(hour=9, tzinfo=UTC)
            elif line.startswith("@") and ":" in line:
                name, value = line[1:].split(":", 1)
                headers[name.strip()] = value.strip()
            else:
                lines.append(line)
        text = "\n".join(lines).strip()
        if public_file:
            headers, text = _message_parts((CORPORA / "bounces" / public_file).read_bytes())
        replies.append(LabelledReply(ReplyCategory(category), language, text, headers, received_at, returns_on,
                                     public_file))
    return replies


def classified(reply: LabelledReply) -> Classification:
    return classify_reply(reply.text, reply.headers, reply.received_at)


def scores(replies: list[LabelledReply]) -> dict:
    """Per-category precision, recall and F1, macro-F1 over the categories present, and the out-of-office return
    dates read right."""
    counts: dict[str, Counter] = defaultdict(Counter)
    dates = Counter()
    languages = Counter(reply.language for reply in replies)
    for reply in replies:
        result = classified(reply)
        if result.category == reply.category:
            counts[reply.category]["tp"] += 1
        else:
            counts[reply.category]["fn"] += 1
            counts[result.category]["fp"] += 1
        if reply.returns_on is not None:
            dates["stated"] += 1
            dates["right"] += result.returns_on == reply.returns_on
    per_category = {}
    for category, count in sorted(counts.items()):
        precision = count["tp"] / (count["tp"] + count["fp"]) if count["tp"] + count["fp"] else 0.0
        recall = count["tp"] / (count["tp"] + count["fn"]) if count["tp"] + count["fn"] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_category[str(category)] = {"support": count["tp"] + count["fn"], "precision": precision, "recall": recall,
                                       "f1": f1}
    macro = statistics.fmean(row["f1"] for row in per_category.values())
    return {"replies": len(replies), "languages": dict(languages), "per_category": per_category, "macro_f1": macro,
            "return_dates": dict(dates)}


def public_machine_messages() -> list[tuple[str, dict[str, str], str]]:
    """Every delivery report and auto-reply of tests/corpora/bounces: (file, headers, own text)."""
    return [(path.name, *_message_parts(path.read_bytes()))
            for path in sorted((CORPORA / "bounces" / "sisimai-set-of-emails").glob("*.eml"))]


def machine_messages() -> dict:
    tally = Counter()
    as_human = []
    for name, headers, text in public_machine_messages():
        result = classify_reply(text, headers, RECEIVED_AT)
        kind = "auto-reply" if name.startswith("rfc3834") else "bounce"
        tally[f"{kind} → {result.category}"] += 1
        if result.category not in MACHINE:
            as_human.append(name)
    return {"tally": dict(tally), "as_human": as_human}


# ---------------------------------------------------------------- speed


def speed(rounds: int = 20) -> dict:
    """Per reply, in milliseconds of this thread's CPU time (what the reply costs, whatever else the machine runs) and
    of wall-clock time: the classifier alone, and the cutter and the classifier, over every corpus body and labelled
    reply."""
    bodies = [((CORPORA / "replies" / r.source / r.file).read_text(errors="replace"), r.format == "html")
              for r in corpus_replies() if r.format != "eml"]
    replies = labelled("dev") + labelled("heldout")
    inputs = [(own_text(body, html=html), {}, body, html) for body, html in bodies]
    inputs += [(reply.text, reply.headers, reply.text, False) for reply in replies]
    # the slowest a reply can be: its first 1,000 characters (what the phrases are looked for in) match none
    plain = " ".join(["We reviewed the notes from the offsite and the budget draft for the next quarter"] * 14)
    inputs.append((plain, {}, plain, False))
    timed: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        for text, headers, body, html in inputs:
            for name, work in (("classify", lambda: classify_reply(text, headers, RECEIVED_AT)),
                               ("cut_and_classify", lambda: classify_reply(own_text(body, html=html), headers,
                                                                            RECEIVED_AT))):
                cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
                work()
                timed[f"{name} (CPU)"].append((time.thread_time_ns() - cpu) / 1e6)
                timed[f"{name} (wall)"].append((time.perf_counter_ns() - wall) / 1e6)

    def quantiles(values: list[float]) -> dict:
        ordered = sorted(values)
        return {"p50": ordered[len(ordered) // 2], "p99": ordered[int(len(ordered) * 0.99)], "max": ordered[-1],
                "n": len(ordered)}

    return {name: quantiles(values) for name, values in sorted(timed.items())}


# ---------------------------------------------------------------- report


def _rate(tally: dict) -> str:
    return f"{tally['kept']}/{tally['total']} ({tally['kept'] / tally['total']:.0%})"


def report(history: dict, held_out: dict, dev: dict, later: dict, unseen: dict, never_tuned: dict, machine: dict,
           timing: dict, where: dict) -> str:
    """The section, `where` (`bench.machine()`) naming the commit, the machine and the load as it began."""
    tallies = history["tallies"]
    lines = [SECTION, "", provenance(where), "",
             "Reproduce with `python -m bench.replies` (offline, about a minute).", "",
             "### Quoted history: the kept text equals the expected visible text (whitespace-normalised)", "",
             f"Corpora: tests/corpora/replies (their sources and licences in its README). Target ≥ "
             f"{QUOTED_HISTORY_TARGET:.0%}: **{_rate(tallies['all'])}**, "
             f"{'met' if tallies['all']['kept'] / tallies['all']['total'] >= QUOTED_HISTORY_TARGET else 'missed'}.", "",
             "| by | kept / messages |", "|---|---|"]
    for prefix in ("source", "language", "format", "client"):
        for key in sorted(k for k in tallies if k.startswith(prefix + ":")):
            lines.append(f"| {key.replace(':', ' ', 1)} | {_rate(tallies[key])} |")
    lines += ["", "Not kept as expected: " + (", ".join(f"`{name}`" for name in history["failed"]) or "none") + ".", "",
              "The cutter before this one (`mail-parser-reply` 1.36 with a quoted-line filter, commit 60966f5) kept "
              "58/140 (41%) of the same corpora, measured the same day on this machine.", "",
              "### Categories: held-out labelled replies", "",
              f"{held_out['replies']} replies (tests/corpora/replies_labelled/heldout.txt), languages "
              + ", ".join(f"{k} {v}" for k, v in sorted(held_out["languages"].items())) + f". Target macro-F1 ≥ "
              f"{MACRO_F1_TARGET}: **{held_out['macro_f1']:.3f}**, "
              f"{'met' if held_out['macro_f1'] >= MACRO_F1_TARGET else 'missed'}; development set "
              f"({dev['replies']} replies, tuned on): {dev['macro_f1']:.3f}. Both sets were written by the author of "
              "the rules, the held-out one committed before the rules and never tuned on, but with its phrasing "
              "known to the author. Replies in phrasings the author had not had in mind score far lower: "
              "after.txt (26) and fresh.txt (32), written later, scored macro-F1 0.458 and 0.609 with the rules of "
              "commit 87af208 (`scores(labelled('after'))` at that commit), most misses falling to `unknown`; the "
              "rules were then broadened with both (now " + ", ".join(f"{name} {value['macro_f1']:.3f}"
                                                                       for name, value in later.items())
              + ", development sets). Expect field replies between the two.", "",
              f"unseen.txt ({unseen['replies']} replies, languages "
              + ", ".join(f"{k} {v}" for k, v in sorted(unseen["languages"].items())) + ") was written by a writer "
              "who had read neither the rules nor the other sets, and measured once: macro-F1 "
              f"**{unseen['macro_f1']:.3f}**. With the held-out set, {never_tuned['replies']} replies the rules were "
              f"never tuned on (the target's set of at least 200): macro-F1 **{never_tuned['macro_f1']:.3f}**, "
              f"{'met' if never_tuned['macro_f1'] >= MACRO_F1_TARGET else 'missed'}. Per category, over those "
              f"{never_tuned['replies']}:", "",
              "| category | support | precision | recall | F1 |", "|---|---|---|---|---|"]
    for category, row in never_tuned["per_category"].items():
        lines.append(f"| {category} | {row['support']} | {row['precision']:.2f} | {row['recall']:.2f} | {row['f1']:.2f} |")
    dates = held_out["return_dates"]
    lines += ["", f"Out-of-office return dates read right: {dates.get('right', 0)}/{dates.get('stated', 0)} "
              "(held-out replies that state one).", "",
              "### Public delivery reports and auto-replies are never a person's reply", "",
              f"{sum(machine['tally'].values())} messages of sisimai/set-of-emails (BSD-2-Clause): "
              + ", ".join(f"{k}: {v}" for k, v in sorted(machine["tally"].items()))
              + f". Read as a person's reply: {len(machine['as_human'])}.", "",
              "### Speed, per reply, offline (target: classification ≤ 5 ms p99)", "",
              "CPU: this thread's CPU time per reply, the cost itself; wall: elapsed time, which on a shared, loaded "
              "machine includes waiting for a core.", "",
              "| | p50 ms | p99 ms | max ms | replies timed |", "|---|---|---|---|---|"]
    for name, row in timing.items():
        lines.append(f"| {name.replace('_', ' ')} | {row['p50']:.3f} | {row['p99']:.3f} | {row['max']:.3f} | {row['n']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    where = bench.machine()
    later = {name: scores(labelled(name)) for name in ("after", "fresh")}
    never_tuned = {name: labelled(name) for name in ("heldout", "unseen")}
    section = report(quoted_history(), scores(never_tuned["heldout"]), scores(labelled("dev")), later,
                     scores(never_tuned["unseen"]), scores(never_tuned["heldout"] + never_tuned["unseen"]),
                     machine_messages(), speed(), where)
    write_own_section(RESULTS, "replies", section)
    print(section)


if __name__ == "__main__":
    main()
