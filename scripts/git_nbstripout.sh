#!/usr/bin/env bash
# Notebooks stay clean in git (issue 43): .gitattributes sends *.ipynb through the "nbstripout"
# filter; this defines it in the checkout's git config, with the venv's nbstripout by a relative path
# (git runs filters at the top of the work tree, so each worktree uses its own .venv). Outputs and
# execution counts are stripped from what is staged; the file you work on keeps them. --keep-id:
# cell ids stay as committed. Called by `make setup`; does nothing outside a git checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0
want=".venv/bin/nbstripout --keep-id"
if [ "$(git config --get filter.nbstripout.clean || true)" != "$want" ]; then
  git config filter.nbstripout.clean "$want"
  git config filter.nbstripout.smudge cat
  git config diff.ipynb.textconv ".venv/bin/nbstripout -t --keep-id"
  echo "git: notebooks are stripped of outputs when staged (filter nbstripout, .gitattributes)"
fi
