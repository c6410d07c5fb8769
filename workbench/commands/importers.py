"""``workbench import kilt|wiki18|wikidata5m|qa FILE --db ...``: real knowledge sources and QA sets; ``workbench import
seed-pool --from nq --from hotpotqa``: the seed pool and validation split built from imported training sets."""

from __future__ import annotations

import argparse
import json

from workbench.commands import add_db, db_path, existing_db
from workbench.kg.input_files import MAX_JSON_BYTES, MAX_LINE_BYTES
from workbench.kg.sources import IMPORT_MEMORY_LIMIT


def _line_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-line-bytes", type=int, default=MAX_LINE_BYTES,
                   help=f"the longest line read (default {MAX_LINE_BYTES:,}, ours); a longer one is a malformed line, "
                        "refused before it is read whole")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("import", help="import a knowledge source (KILT, wiki-18, Wikidata5M) or a QA dataset")
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)

    sources = {
        "kilt": "KILT knowledge source JSON lines (pages, paragraphs, anchors -> labelled edges)",
        "wiki18": "wiki-18 corpus JSON lines (id, contents = '\"Title\"\\ntext') as passages",
        "wikidata5m": "Wikidata5M triples (head<TAB>relation<TAB>tail) with alias files",
    }
    for kind, help_ in sources.items():
        p = kinds.add_parser(kind, help=help_, description=help_)
        p.add_argument("file", help="input file (.gz is read transparently)")
        if kind == "wikidata5m":
            p.add_argument("--aliases", default=None, help="entity alias file: id<TAB>alias1<TAB>alias2 ...")
            p.add_argument("--relation-aliases", default=None,
                           help="relation alias file: id<TAB>label ... (names triples' relations)")
        p.add_argument("--skip-bad", action="store_true",
                       help="record malformed lines in skipped_lines and go on, instead of stopping")
        p.add_argument("--append", action="store_true",
                       help="import the file even though this store already holds it (its rows are added again)")
        p.add_argument("--batch-rows", type=int, default=10_000, help="rows per Arrow insert batch")
        _line_limit(p)
        p.add_argument("--memory-limit", default=IMPORT_MEMORY_LIMIT,
                       help=f"DuckDB memory limit for the import, e.g. 8GB (beyond it DuckDB spills to disk; default "
                            f"{IMPORT_MEMORY_LIMIT}, ours: constant memory at any file size; 'none': DuckDB's 80%% of RAM)")
        p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
        add_db(p)
        p.set_defaults(func=_import_source)

    q = kinds.add_parser("qa", help="QA dataset: Search-R1/FlashRAG parquet, KILT task JSONL, HotpotQA/2Wiki JSON, "
                                    "TriviaQA JSON, PopQA TSV, Bamboogle CSV, JSONL")
    q.add_argument("file")
    q.add_argument("--name", required=True, help="dataset name stored in questions.dataset")
    q.add_argument("--split", default=None, help="split (default: the records' own, else 'test')")
    q.add_argument("--format", default="auto",
                   choices=["auto", "parquet", "kilt", "hotpot", "triviaqa", "popqa", "bamboogle", "jsonl"],
                   help="default auto: detected from the extension and the first record or header line")
    how = q.add_mutually_exclusive_group()
    how.add_argument("--replace", action="store_true", help="overwrite this dataset's questions of the same splits")
    how.add_argument("--append", action="store_true",
                     help="add to this dataset's questions of the same splits (by default an error)")
    q.add_argument("--skip-bad", action="store_true",
                   help="record malformed records in skipped_lines and go on, instead of stopping")
    _line_limit(q)
    q.add_argument("--max-json-bytes", type=int, default=MAX_JSON_BYTES,
                   help=f"the largest whole-file JSON (HotpotQA, 2Wiki, TriviaQA) read, parsed at once at ~5x its size "
                        f"in memory (default {MAX_JSON_BYTES:,}, ours)")
    add_db(q)
    q.set_defaults(func=_import_qa)

    sp = kinds.add_parser("seed-pool", help="the seed pool and validation split from imported QA training sets",
                          description="Builds dataset NAME's splits 'seed' (the seed pool) and 'val' from the "
                                      "imported SOURCE_SPLIT questions of each --from dataset (section 4.1: NQ + "
                                      "HotpotQA training sets), shuffled by --seed, in one transaction.")
    sp.add_argument("--from", dest="sources", action="append", required=True, metavar="DATASET",
                    help="an imported QA dataset (repeatable), e.g. --from nq --from hotpotqa")
    sp.add_argument("--name", default="nq_hotpotqa",
                    help="the dataset to build (default nq_hotpotqa: the paper presets' method.seed_dataset/val_dataset)")
    sp.add_argument("--source-split", default="train", help="the sources' split to draw from (default train)")
    sp.add_argument("--val", type=int, default=500,
                    help="validation questions drawn from each source (default 500, ours); the rest is the seed pool")
    sp.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    sp.add_argument("--replace", action="store_true", help="rebuild NAME's seed and val splits when they exist")
    add_db(sp)
    sp.set_defaults(func=_import_seed_pool)


def memory_limit(value: str | None) -> str | None:
    """``--memory-limit`` as DuckDB reads it (e.g. '8GB'), checked before the store is opened;
    None for 'none' (DuckDB's own default).

    Example:
        >>> memory_limit("none") is None
        True
        >>> memory_limit("abc")
        Traceback (most recent call last):
        ...
        ValueError: --memory-limit 'abc': expected a size such as 512MB or 8GB
    """
    import duckdb

    if value is None or value.strip().lower() == "none":
        return None
    probe = duckdb.connect(":memory:")
    try:
        probe.execute("SET memory_limit = ?", [value])
    except duckdb.Error:
        raise ValueError(f"--memory-limit {value!r}: expected a size such as 512MB or 8GB") from None
    finally:
        probe.close()
    return value


NAMES = {"kilt": "KILT file", "wiki18": "wiki-18 file", "wikidata5m": "Wikidata5M file", "qa": "QA file"}


def _checked(args: argparse.Namespace, *files: str | None) -> None:
    """Every input file exists and is a file, and the size limits are positive, before the store is
    opened (or created)."""
    from workbench.kg.sources import check_input

    for flag in ("max_line_bytes", "max_json_bytes"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise ValueError(f"--{flag.replace('_', '-')} {value}: expected a positive number of bytes")
    for file in files:
        if file is not None:
            check_input(file, NAMES[args.kind])


def _import_source(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.kg import sources

    if args.batch_rows < 1:
        raise ValueError(f"--batch-rows must be >= 1, got {args.batch_rows}")
    limit = memory_limit(args.memory_limit)
    _checked(args, args.file, getattr(args, "aliases", None), getattr(args, "relation_aliases", None))
    con = store.connect(db_path(args))
    try:
        common = dict(skip_bad=args.skip_bad, batch_rows=args.batch_rows, progress=not args.no_progress,
                      append=args.append, memory_limit=limit, max_line_bytes=args.max_line_bytes)
        if args.kind == "kilt":
            result = sources.import_kilt(con, args.file, **common)
        elif args.kind == "wiki18":
            result = sources.import_wiki18(con, args.file, **common)
        else:
            result = sources.import_wikidata5m(con, args.file, args.aliases, args.relation_aliases, **common)
    finally:
        con.close()
    print(json.dumps(result, indent=2))
    return 0


def _import_qa(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.qa_import import import_qa

    _checked(args, args.file)
    con = store.connect(db_path(args))
    try:
        result = import_qa(con, args.file, args.name, split=args.split, fmt=args.format, replace=args.replace,
                           append=args.append, skip_bad=args.skip_bad, max_line_bytes=args.max_line_bytes,
                           max_json_bytes=args.max_json_bytes)
    finally:
        con.close()
    print(json.dumps(result, indent=2))
    return 0


def _import_seed_pool(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.qa_import import build_seed_pool

    con = store.connect(existing_db(args, hint="import the QA training sets first: workbench import qa FILE "
                                              "--name nq --split train --db PATH"))
    try:
        result = build_seed_pool(con, args.sources, name=args.name, source_split=args.source_split, val=args.val,
                                 seed=args.seed, replace=args.replace)
    finally:
        con.close()
    print(json.dumps(result, indent=2))
    return 0
