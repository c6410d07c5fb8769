#!/usr/bin/env bash
# The paper tier end to end on one GPU with random weights of the real shape (issue 16's proof).
# Usage: scripts/paper_tier_smoke.sh [OUT] [SHAPE: 3b|7b|tiny] [ENTITIES] [extra paper_tier_smoke.py args...]
# Needs python3 with torch, transformers, peft, sentence-transformers, duckdb, bm25s, faiss (vLLM optional).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/paper-tier-smoke}"; shape="${2:-3b}"; entities="${3:-100000}"
shift $(( $# < 3 ? $# : 3 ))
PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" "$here/scripts/paper_tier_smoke.py" \
  --out "$out" --shape "$shape" --entities "$entities" "$@"
