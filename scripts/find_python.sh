#!/bin/sh
# Picks the Python interpreter for the workbench's venv (the Makefile calls it).
#
#   scripts/find_python.sh            newest supported interpreter that runs, of CANDIDATES
#   scripts/find_python.sh python3.12 that one, if it runs and is supported
#   scripts/find_python.sh --all      every supported interpreter that runs, one per version
#
# Prints "X.Y INTERPRETER" (one line; with --all one line per version, newest first) and exits 0.
# Each candidate is run, not just looked up: a pyenv shim of a version that is not active exists on
# the PATH but exits non-zero, and is skipped. When none fits it prints one line on stderr saying
# what it tried, which versions are supported and how to get one, and exits 1.
#
# The supported range is requires-python of pyproject.toml (tests/test_find_python.py checks that
# the two agree).
MIN_MINOR=11
MAX_MINOR=13
CANDIDATES="python3.13 python3.12 python3.11 python3"

all=
if [ "$1" = "--all" ]; then
    all=1
    shift
fi
[ $# -gt 0 ] && CANDIDATES="$*"

seen=
tried=
found=
for cand in $CANDIDATES; do
    if ! command -v "$cand" >/dev/null 2>&1; then
        tried="$tried, $cand (not found)"
        continue
    fi
    version=$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null </dev/null)
    status=$?
    case "$status:$version" in
        0:[0-9].[0-9]|0:[0-9].[0-9][0-9]) ;;
        *)
            tried="$tried, $cand (does not run)"
            continue
            ;;
    esac
    major=${version%%.*}
    minor=${version#*.}
    if [ "$major" -ne 3 ] || [ "$minor" -lt "$MIN_MINOR" ] || [ "$minor" -gt "$MAX_MINOR" ]; then
        tried="$tried, $cand ($version)"
        continue
    fi
    case " $seen " in *" $version "*) continue ;; esac
    seen="$seen $version"
    echo "$version $cand"
    found=1
    [ -n "$all" ] || exit 0
done
[ -n "$found" ] && exit 0

echo "No supported Python: tried ${tried#, }. The workbench needs Python 3.$MIN_MINOR to 3.$MAX_MINOR;" \
    "install one (python.org, 'apt install python3.12-venv', 'brew install python@3.13'," \
    "'pyenv install 3.13' then 'pyenv global 3.13') or name it: make setup PY=/path/to/python3.X" >&2
exit 1
