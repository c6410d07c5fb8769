"""``workbench kilt-replica OUT --pages N --seed S``: a synthetic KILT knowledge source for scale tests."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kilt-replica", help="write a seeded synthetic replica of the KILT knowledge source",
                       description="Write a synthetic KILT knowledge source in KILT's JSON-lines layout (one page "
                                   "a line: _id, wikipedia_id, wikipedia_title, text, anchors, categories, history, "
                                   "wikidata_info), about 6.4 KB and 18 anchors a page like the real 35 GB dump, "
                                   "streamed in constant memory; byte-identical for a seed. Import it with "
                                   "`workbench import kilt OUT`.")
    p.add_argument("out", metavar="OUT.jsonl[.gz]", help="file to write (.gz: gzip-compressed)")
    p.add_argument("--pages", type=int, default=120_000, help="number of pages (default 120,000)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--force", action="store_true", help="replace OUT when it is already there")
    p.set_defaults(func=_replica)


def _replica(args: argparse.Namespace) -> int:
    from workbench.kg.kilt_replica import write_replica

    from workbench.limits import check_seed

    check_seed(args.seed, "--seed")
    print(json.dumps(write_replica(args.out, args.pages, args.seed, progress=not args.no_progress, force=args.force), indent=2))
    return 0
