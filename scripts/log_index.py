"""LOG.md as an index, the sessions in log/ (one file a day): find a session or a decision.

    python scripts/log_index.py                 # move LOG.md's sessions into log/, rewrite the index
    python scripts/log_index.py --check REV     # every line of REV's LOG.md is in exactly one place

A session is a ``## YYYY-MM-DD — session N: headline`` section. Each one found in LOG.md goes to
``log/YYYY-MM-DD.md`` (replacing a section of the same heading there, else appended), and LOG.md
is rewritten as: its preamble (what comes before the first session), a table of the sessions (date,
number, headline) and their ``###`` entries grouped by topic (TOPICS: first match wins). Run it
again at any time: it is idempotent, so a session appended to LOG.md (or written straight into
log/) only needs this command.

--check REV compares the multiset of lines of ``git show REV:LOG.md`` with that of the preamble
plus every log/ file (the lines this script adds, a day file's title and blank lines, left out):
exit 1 and the difference when a line was lost or doubled.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION = re.compile(r"^## (\d{4}-\d{2}-\d{2}) — session (\d+): (.*)$")
INDEX_START = "<!-- log_index: the rest of this file is written by scripts/log_index.py from log/*.md -->"

# (topic, pattern over an entry's heading): the first that matches files the entry.
TOPICS = [
    ("Decisions, as recorded", r"^decisions?\b"),
    ("Session upkeep: device plans and calls, checks, reviews, merges",
     r"^(next session's device plan|checks at the end|device (calls|time|runs that went wrong)|merged|left for later"
     r"|shipped and shown|also mended|a flaky test|how far a device run repeats)|^(the |a |two )?(read-only )?"
     r"reviews? |^the last read|^final read|^a read-only review"),
    ("Dr. Free (seed 002; issue 17)", r"dr\. free|drfree|issue 17"),
    ("EoG (seed 004; issue 19)", r"eog|topology|issue 19"),
    ("DynaSearcher (seed 003; issue 18)", r"dynasearcher|issue 18"),
    ("Real data and the paper tier: KILT, imports, plan, 3B/7B/8B (issue 16)",
     r"issue 16|paper tier|paper-tier|kilt|import|wiki|e5|plan's|issue 42|table 1 suite"),
    ("The GPU engine: vLLM, LoRA, Unsloth, several GPUs (issue 14)",
     r"issue 14|gpu|vllm|lora|unsloth|h200's dr|several processes|attention"),
    ("Co-evolution: the gate, the proposer, the pool's floor (issue 15)",
     r"issue 15|gate|proposer|verifier|fallback|floor|penali[sz]|answer types|write-back|co-evolution"),
    ("RL on TinyWorld: learning rates, seeds, the Table 2 rows, reference runs",
     r"table [12]|seeds|rounds|\brl\b|learning-rate|float32|bf16|search-r1|build-up|budget|reference|rl_compare"
     r"|result|twice as long|the loop on|slots"),
    ("Notebooks, batches, timings, Python versions (issues 13, 21, 40)",
     r"notebook|batches|python|timing|issue 13|issue 21|issue 40"),
    ("The tiny backbone and its warm start", r"warm start|base|backbone"),
    ("Benchmarks of the parts: walks, retrieval, rollouts, the loop", r"bench"),
    ("Retrieval and search", r"retrieval|search|server"),
    ("Safety: nothing lost, resume, faults (issues 11, 12, 39)",
     r"nothing lost|round as one unit|issue 39|issue 1[12]|resume|fault"),
]
OTHER = "Other"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (and MkDocs' with pymdownx.slugs.slugify(case="lower")).

    Example:
        >>> slug("2026-11-30 — session 1: foundation")
        '2026-11-30--session-1-foundation'
        >>> slug("Retrieval (`workbench bench retrieval --preset tiny`)")
        'retrieval-workbench-bench-retrieval---preset-tiny'
    """
    text = unicodedata.normalize("NFC", heading.replace("`", "")).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def split_sessions(lines: list[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(the lines before the first session, [(session heading, its lines incl. the heading)])."""
    starts = [i for i, line in enumerate(lines) if SESSION.match(line)]
    if not starts:
        return lines, []
    pre = lines[:starts[0]]
    bounds = starts + [len(lines)]
    return pre, [(lines[a], lines[a:b]) for a, b in zip(bounds, bounds[1:])]


def day_title(day: str) -> str:
    return f"# LOG, {day}"


def merge_into_days(sessions: list[tuple[str, list[str]]], log_dir: Path) -> None:
    """Each session into log/DAY.md: a section of the same heading is replaced, else appended."""
    for heading, body in sessions:
        day = SESSION.match(heading).group(1)
        path = log_dir / f"{day}.md"
        text = path.read_text().splitlines() if path.exists() else [day_title(day), ""]
        head, merged = split_sessions(text)
        keys = [h for h, _ in merged]
        body = _ending_blank(body)
        if heading in keys:
            merged[keys.index(heading)] = (heading, body)
        else:
            merged.append((heading, body))
        merged.sort(key=lambda hb: int(SESSION.match(hb[0]).group(2)))
        out = head + [line for _, b in merged for line in b]
        while out and not out[-1].strip():
            out.pop()
        path.write_text("\n".join(out) + "\n")


def _ending_blank(body: list[str]) -> list[str]:
    body = list(body)
    while body and not body[-1].strip():
        body.pop()
    return body + [""]


def topic_of(heading: str) -> str:
    """The first topic of TOPICS whose pattern matches ``heading``.

    Example:
        >>> topic_of("Dr. Free as a method (issue 17; helper, merged)")
        'Dr. Free (seed 002; issue 17)'
    """
    return next((name for name, pattern in TOPICS if re.search(pattern, heading, re.I)), OTHER)


def render_index(preamble: list[str], log_dir: Path) -> list[str]:
    sessions, entries = [], {name: [] for name, _ in TOPICS + [(OTHER, "")]}
    for path in sorted(log_dir.glob("*.md")):
        _, found = split_sessions(path.read_text().splitlines())
        for heading, body in found:
            day, number, headline = SESSION.match(heading).groups()
            where = f"log/{path.name}"
            sessions.append((int(number), day, headline, f"{where}#{slug(heading[3:])}"))
            subs = [line[4:] for line in body if line.startswith("### ")]
            for sub in subs:
                anchor = slug(sub) if subs.count(sub) == 1 and _unique_in_file(sub, path) else slug(heading[3:])
                entries[topic_of(sub)].append(f"- [{sub}]({where}#{anchor}) · session {number}, {day}")
    sessions.sort()
    out = list(preamble)
    while out and not out[-1].strip():
        out.pop()
    out += ["", INDEX_START, "",
            "The sessions are in `log/`, one file a day; below, each session in one line, then every entry",
            "(a `###` heading of a session: a measurement, a decision, a negative result) by topic. To add",
            "a session, append it to this file as before (`## YYYY-MM-DD — session N: headline`) and run",
            "`python scripts/log_index.py`: it moves the section to `log/YYYY-MM-DD.md` and rewrites this index.",
            "", "## Sessions", "", "| date | session | headline |", "|---|---|---|"]
    out += [f"| {day} | [{number}]({link}) | {headline.replace('|', '/')} |" for number, day, headline, link in sessions]
    out += ["", "## By topic"]
    for name, items in entries.items():
        if items:
            out += ["", f"### {name}", ""] + items
    return out + [""]


def _unique_in_file(sub: str, path: Path) -> bool:
    return path.read_text().splitlines().count(f"### {sub}") == 1


def rebuild(log_md: Path, log_dir: Path) -> None:
    """Move LOG.md's sessions into ``log_dir`` and rewrite LOG.md as the index."""
    lines = log_md.read_text().splitlines()
    if INDEX_START in lines:  # drop the index written last time, keep what was added after it
        cut = lines.index(INDEX_START)
        after = lines[cut:]
        first = next((i for i, line in enumerate(after) if SESSION.match(line)), None)
        lines = lines[:cut] + (after[first:] if first is not None else [])
    preamble, sessions = split_sessions(lines)
    log_dir.mkdir(exist_ok=True)
    merge_into_days(sessions, log_dir)
    log_md.write_text("\n".join(render_index(preamble, log_dir)))


def check(rev: str, log_md: Path, log_dir: Path) -> int:
    """0 when the lines of ``rev``'s LOG.md are, as a multiset, those kept here; else 1 and the diff."""
    old = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:LOG.md"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    lines = log_md.read_text().splitlines()
    kept = lines[:lines.index(INDEX_START)] if INDEX_START in lines else lines
    for path in sorted(log_dir.glob("*.md")):
        kept += [line for line in path.read_text().splitlines() if line != day_title(path.stem)]
    want, have = Counter(x for x in old if x.strip()), Counter(x for x in kept if x.strip())
    lost, extra = want - have, have - want
    for label, diff in (("lost", lost), ("added or doubled", extra)):
        for line, n in sorted(diff.items()):
            print(f"{label} x{n}: {line}")
    print(f"{sum(want.values())} non-blank lines in {rev}:LOG.md; {sum(have.values())} in LOG.md's preamble and log/; "
          f"{sum(lost.values())} lost, {sum(extra.values())} added or doubled")
    return 1 if lost or extra else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", metavar="REV", help="compare with REV's LOG.md instead of rebuilding")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout (LOG.md and log/ there)")
    args = ap.parse_args(argv)
    log_md, log_dir = args.root / "LOG.md", args.root / "log"
    if args.check:
        return check(args.check, log_md, log_dir)
    rebuild(log_md, log_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
