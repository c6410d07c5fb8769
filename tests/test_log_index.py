"""scripts/log_index.py: LOG.md's sessions moved into log/ (one file a day) and an index left in
LOG.md, with no line lost or doubled, idempotently (issue 43)."""

import importlib.util
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("log_index", ROOT / "scripts" / "log_index.py")
log_index = importlib.util.module_from_spec(spec)
spec.loader.exec_module(log_index)

LOG = """# LOG

Preamble line.

## 2026-11-30 — session 1: foundation

### Retrieval (`workbench bench retrieval`)
BM25 recall 1.00.

### Checks at the end
all green

## 2026-11-30 — session 2: a base | that learns

### Checks at the end
all green

## 2026-12-01 — session 3: the round

### Decisions (session 3)
lr 3e-5.
"""


def _lines(root: Path) -> Counter:
    lines = (root / "LOG.md").read_text().splitlines()
    kept = lines[:lines.index(log_index.INDEX_START)]
    for path in (root / "log").glob("*.md"):
        kept += [x for x in path.read_text().splitlines() if x != log_index.day_title(path.stem)]
    return Counter(x for x in kept if x.strip())


def test_sessions_move_to_day_files_and_every_line_is_kept_once(tmp_path):
    (tmp_path / "LOG.md").write_text(LOG)
    assert log_index.main(["--root", str(tmp_path)]) == 0
    assert sorted(p.name for p in (tmp_path / "log").iterdir()) == ["2026-11-30.md", "2026-12-01.md"]
    assert _lines(tmp_path) == Counter(x for x in LOG.splitlines() if x.strip())
    index = (tmp_path / "LOG.md").read_text()
    assert "| 2026-11-30 | [2](log/2026-11-30.md#2026-11-30--session-2-a-base--that-learns) | a base / that learns |" in index
    assert "- [Decisions (session 3)](log/2026-12-01.md#decisions-session-3) · session 3, 2026-12-01" in index
    # a heading twice in one file has no anchor of its own that GitHub and MkDocs agree on: its session's
    assert "- [Checks at the end](log/2026-11-30.md#2026-11-30--session-1-foundation) · session 1" in index


def test_rerunning_changes_nothing_and_an_appended_session_moves_too(tmp_path):
    (tmp_path / "LOG.md").write_text(LOG)
    log_index.main(["--root", str(tmp_path)])
    first = {p.name: p.read_text() for p in [tmp_path / "LOG.md", *(tmp_path / "log").iterdir()]}
    log_index.main(["--root", str(tmp_path)])
    assert first == {p.name: p.read_text() for p in [tmp_path / "LOG.md", *(tmp_path / "log").iterdir()]}
    with open(tmp_path / "LOG.md", "a") as f:
        f.write("\n## 2026-12-01 — session 4: more\n\n### Batches (issue 13)\ntwo points in 13 s\n")
    log_index.main(["--root", str(tmp_path)])
    day = (tmp_path / "log" / "2026-12-01.md").read_text()
    assert day.index("session 3: the round") < day.index("session 4: more") and "two points in 13 s" in day
    index = (tmp_path / "LOG.md").read_text()
    assert "two points in 13 s" not in index and "| 2026-12-01 | [4](" in index
