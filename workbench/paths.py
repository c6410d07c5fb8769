"""Where data, runs and figures live.

Defaults are folders of the project checkout (the folder holding ``pyproject.toml`` above this
package), or of the current directory when the package is installed elsewhere. Each can be moved
with an environment variable: ``WORKBENCH_DATA``, ``WORKBENCH_RUNS``, ``WORKBENCH_FIGURES``.
No other module builds paths from scratch.

Example:
    >>> from workbench import paths
    >>> paths.default_db("smoke").name
    'smoke.duckdb'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def project_root() -> Path:
    """The checkout holding this package, else the current directory."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def _dir(env: str, default: str) -> Path:
    path = Path(os.environ.get(env) or project_root() / default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    return _dir("WORKBENCH_DATA", "data")


def runs_dir() -> Path:
    return _dir("WORKBENCH_RUNS", "runs")


def figures_dir() -> Path:
    return _dir("WORKBENCH_FIGURES", "figures")


def cache_dir() -> Path:
    """Content-addressed caches (indexes, warm starts) that can always be rebuilt."""
    path = data_dir() / "cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_db(preset: str = "tiny") -> Path:
    """The store a preset uses unless ``--db`` says otherwise."""
    return data_dir() / f"{preset}.duckdb"


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def local_model(name: str) -> str:
    """Where a model named in a config is loaded from: ``name`` itself when that path exists, else
    ``data/models/<last part of name>`` when the user downloaded it there (the README's layout), else
    ``name`` unchanged (a hub id, loaded from the Hugging Face cache; offline runs need it there).

    Example:
        >>> local_model("/tmp"), local_model("no-such-org/no-such-model-xyz")
        ('/tmp', 'no-such-org/no-such-model-xyz')
    """
    if Path(name).exists():
        return str(name)
    here = data_dir() / "models" / Path(str(name)).name
    return str(here) if here.is_dir() else str(name)


def plain_name(name: str, flag: str) -> str:
    """``name`` when it names a file or folder *inside* a folder (no '/', '\\', '..' or leading
    '.'), else ValueError naming ``flag``: what a batch, a figure or a table is called cannot
    write outside its folder.

    Example:
        >>> plain_name("figure3", "name")
        'figure3'
        >>> plain_name("../x", "--name")
        Traceback (most recent call last):
        ...
        ValueError: --name '../x': expected a plain name (no '/', '\\\\' or leading '.'), since it names a file in its folder
    """
    if not isinstance(name, str) or not name or name.startswith(".") or "/" in name or "\\" in name \
            or "\0" in name:
        raise ValueError(f"{flag} {name!r}: expected a plain name (no '/', '\\\\' or leading '.'), "
                         "since it names a file in its folder")
    return name


def is_duckdb_file(path: str | Path) -> bool:
    """Whether ``path`` is a DuckDB database file (its header carries ``DUCK`` at byte 8)."""
    try:
        with open(path, "rb") as f:
            return f.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def output_file(path: str | Path, flag: str, inputs=(), force: bool = False) -> Path:
    """``path`` checked as a file a command may write, else ValueError naming ``flag``.

    Never one of ``inputs`` (the files the command reads: writing would destroy what it is reading,
    whatever ``force`` says), a folder, or, unless ``force``, a file that exists (a DuckDB store
    included): nothing a user made is replaced without being asked.

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp(); store = os.path.join(d, "s.duckdb"); open(store, "w").close()
        >>> output_file(os.path.join(d, "out.jsonl"), "FILE", inputs=[store]).name
        'out.jsonl'
        >>> output_file(store, "FILE", inputs=[store], force=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: FILE .../s.duckdb: that is the store this command reads; write to another file
    """
    out = Path(path)
    for src in (f for s in inputs if s and str(s) != ":memory:" for f in (Path(s), Path(f"{s}.wal"))):
        if src.exists() and out.exists() and out.samefile(src):
            raise ValueError(f"{flag} {out}: that is the store this command reads; write to another file")
    if out.is_dir():
        raise ValueError(f"{flag} {out}: is a folder; expected a file name")
    if out.exists() and not force:
        kind = "a DuckDB store" if is_duckdb_file(out) else "a file"
        raise ValueError(f"{flag} {out}: {kind} is already there; pick another name, or pass --force to replace it")
    return out


@contextlib.contextmanager
def atomic_output(path: str | Path):
    """Yield a temporary path beside ``path``; on success it replaces ``path`` in one rename, on any
    error (or a kill) it is removed or left as a dot-file, and ``path`` is as it was.

    Example:
        >>> import tempfile, os
        >>> out = os.path.join(tempfile.mkdtemp(), "a.txt")
        >>> with atomic_output(out) as tmp:
        ...     _ = tmp.write_text("done")
        >>> open(out).read()
        'done'
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
