"""``workbench import kilt|wiki18|wikidata5m|qa FILE --db ...``: real knowledge sources and QA sets."""

from __future__ import annotations

import argparse
import json

from workbench.commands import add_db, db_path


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
        p.add_argument("--batch-rows", type=int, default=10_000, help="rows per Arrow insert batch")
        p.add_argument("--memory-limit", default=None,
                       help="DuckDB memory limit for the import, e.g. 8GB (beyond it DuckDB spills to disk)")
        p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
        add_db(p)
        p.set_defaults(func=_import_source)

    q = kinds.add_parser("qa", help="QA dataset: Search-R1/FlashRAG parquet, KILT task JSONL, HotpotQA JSON, JSONL")
    q.add_argument("file")
    q.add_argument("--name", required=True, help="dataset name stored in questions.dataset")
    q.add_argument("--split", default=None, help="split (default: the records' own, else 'test')")
    q.add_argument("--format", default="auto", choices=["auto", "parquet", "kilt", "hotpot", "jsonl"])
    q.add_argument("--replace", action="store_true", help="overwrite this dataset's questions of the same splits")
    add_db(q)
    q.set_defaults(func=_import_qa)


def _import_source(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.kg import sources

    if args.batch_rows < 1:
        raise ValueError(f"--batch-rows must be >= 1, got {args.batch_rows}")
    con = store.connect(db_path(args))
    if args.memory_limit:
        con.execute("SET memory_limit = ?", [args.memory_limit])
    common = dict(skip_bad=args.skip_bad, batch_rows=args.batch_rows, progress=not args.no_progress)
    if args.kind == "kilt":
        result = sources.import_kilt(con, args.file, **common)
    elif args.kind == "wiki18":
        result = sources.import_wiki18(con, args.file, **common)
    else:
        result = sources.import_wikidata5m(con, args.file, args.aliases, args.relation_aliases, **common)
    con.close()
    print(json.dumps(result, indent=2))
    return 0


def _import_qa(args: argparse.Namespace) -> int:
    from workbench import store
    from workbench.qa_import import import_qa

    con = store.connect(db_path(args))
    result = import_qa(con, args.file, args.name, split=args.split, fmt=args.format, replace=args.replace)
    con.close()
    print(json.dumps(result, indent=2))
    return 0
