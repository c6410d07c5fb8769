"""An importer's input file read line by line: decompressed, decoded, each line bounded, with a
digest of its content (issue 39). Every importer (``kg.sources``, ``qa_import``) reads through it.

* Compression: ``.gz``, ``.bz2``, ``.xz``, told by the name or, when the name does not say, by the
  file's first bytes; a zip, 7z or zstd file is refused with what to do.
* Encoding: UTF-8 (a leading byte order mark dropped), or UTF-16 / UTF-32 told by a byte order mark
  or, as ``json.loads`` tells them, by the NUL bytes of an ASCII first character. Lines come out as
  UTF-8 bytes whatever the file's encoding. Other encodings (Latin-1) are the importers' bad lines.
* Line ends ``\\n`` or ``\\r\\n`` are removed; blank lines are skipped (``skip_blank``).
* Size: a line longer than ``max_line_bytes`` (:data:`MAX_LINE_BYTES`, ours) is never held whole: its
  bytes are skipped in :data:`CHUNK` pieces and it comes out as an :class:`Oversized` marker.
* Identity: :meth:`Lines.digest` hashes the non-blank lines as they come out, so one source as
  ``.gz``, with CRLF line ends or in UTF-16 has one digest; :meth:`Lines.head` hashes the first
  :data:`HEAD_BYTES` of that stream (a cheap first look: :func:`content_head`).

A read that fails (a truncated or corrupt compressed file, undecodable UTF-16) raises ValueError
naming the file, the line reached, what was expected and what to do.

Example:
    >>> import gzip, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> plain, packed = os.path.join(d, "a.jsonl"), os.path.join(d, "a.jsonl.gz")
    >>> _ = open(plain, "wb").write(b'{"a": 1}\\r\\n\\r\\n{"a": 2}')
    >>> _ = open(packed, "wb").write(gzip.compress(b'{"a": 1}\\n{"a": 2}\\n'))
    >>> with Lines(plain) as lines:
    ...     list(lines), lines.digest() == content_digest(packed)
    ([(1, b'{"a": 1}'), (3, b'{"a": 2}')], True)
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import hashlib
import io
import lzma
import re
import zlib
from pathlib import Path
from typing import Iterator

# Ours: the longest line any importer reads. The largest real KILT page (a long list article with
# its anchors) is a few MB; a line costs about 5x its size in memory while it is parsed (issue 39),
# so 64 MiB bounds one line to ~320 MB. Configurable: ``--max-line-bytes``.
MAX_LINE_BYTES = 64 << 20
# Ours: the largest whole-file JSON (HotpotQA, 2Wiki, TriviaQA) read, parsed at once at ~5x its size in
# memory; HotpotQA's training set, the largest the paper uses, is 566 MB. Configurable: --max-json-bytes.
MAX_JSON_BYTES = 2 << 30
HEAD_BYTES = 1 << 20  # content_head: the first MiB of the decompressed, normalised content
CHUNK = 1 << 20  # an oversized line is skipped in pieces of this size

COMPRESSED = {".gz": gzip.GzipFile, ".bz2": bz2.BZ2File, ".xz": lzma.LZMAFile}
# gzip's mark and deflate method; bzip2's mark, block size and block (or end-of-stream) magic: no text starts so
_MAGIC = ((re.compile(rb"\x1f\x8b\x08"), ".gz"), (re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)"), ".bz2"),
          (re.compile(rb"\xfd7zXZ\x00"), ".xz"))
_REFUSED = ((b"PK\x03\x04", "a zip archive", "unzip it"), (b"7z\xbc\xaf\x27\x1c", "a 7z archive", "extract it"),
            (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it (zstd -d FILE)"))
# Longest first: UTF-32-LE's mark starts with UTF-16-LE's.
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_READ_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError, UnicodeDecodeError)  # BadGzipFile is an OSError


class Oversized:
    """A line longer than the limit, skipped unread: ``size`` its length in bytes (line end excluded)."""

    def __init__(self, size: int, limit: int):
        self.size, self.limit = size, limit

    def __str__(self) -> str:
        return (f"a line of {self.size:,} bytes, longer than the limit of {self.limit:,} (max_line_bytes, ours); "
                "expected one record per line: pass --max-line-bytes N to allow longer lines, or --skip-bad to "
                "skip them")


def compression(path: str | Path) -> str | None:
    """The compression of ``path`` ('.gz', '.bz2', '.xz') by its name, else by its first bytes; None
    for none. A zip, 7z or zstd file is a ValueError saying what to do.

    Example:
        >>> compression("kilt.jsonl.gz"), compression("/dev/null")
        ('.gz', None)
    """
    path = Path(path)
    if path.suffix in COMPRESSED:
        return path.suffix
    with open(path, "rb") as f:
        magic = f.read(10)
    for mark, what, todo in _REFUSED:
        if magic.startswith(mark):
            raise ValueError(f"{path}: {what}; expected a text file (optionally .gz, .bz2 or .xz): {todo} first")
    return next((suffix for mark, suffix in _MAGIC if mark.match(magic)), None)


def encoding_of(start: bytes) -> tuple[str, int]:
    """(encoding, length of its byte order mark) of a file starting with ``start`` (4 bytes or more).

    Example:
        >>> encoding_of(b'\\xff\\xfe{\\x00'), encoding_of(b'{\\x00"\\x00'), encoding_of(b'{"a"')
        (('utf-16-le', 2), ('utf-16-le', 0), ('utf-8', 0))
    """
    for bom, name in _BOMS:
        if start.startswith(bom):
            return name, len(bom)
    if len(start) >= 4:  # an ASCII first character in UTF-16/32 has NUL bytes (json.detect_encoding's rule)
        if start[:3] == b"\0\0\0":
            return "utf-32-be", 0
        if start[1:4] == b"\0\0\0":
            return "utf-32-le", 0
    if len(start) >= 2:
        if start[0] == 0 and start[1]:
            return "utf-16-be", 0
        if start[0] and start[1] == 0:
            return "utf-16-le", 0
    return "utf-8", 0


def _read_error(err: Exception, encoding: str) -> str:
    """What a failed read means, and what to do."""
    if isinstance(err, UnicodeDecodeError):
        return (f"expected {encoding.upper()} text, as the file's first bytes say ({err.reason}); convert the file to "
                f"UTF-8 (iconv -f {encoding.upper()} -t UTF-8)")
    if isinstance(err, EOFError):
        return f"the compressed file ends early (truncated?): {err}; download or copy it again"
    return f"corrupt compressed data: {err}; download or copy it again"


class Lines:
    """``(line number, line)`` of every (non-blank) line of ``path``, a line as UTF-8 bytes without
    its line end, or an :class:`Oversized` marker; with the content's :meth:`digest` and :meth:`head`.

    ``ended`` tells whether the line just given had a line end (a last line without one may be cut
    short); ``position()`` is how far into the file (compressed bytes) the reading is.
    """

    def __init__(self, path: str | Path, max_line_bytes: int = MAX_LINE_BYTES, skip_blank: bool = True):
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes < 1:
            raise ValueError(f"max_line_bytes {max_line_bytes!r}: expected a positive number of bytes")
        self.path, self.limit, self.skip_blank = Path(path), max_line_bytes, skip_blank
        self.encoding, self.ended, self.lineno = "utf-8", True, 0
        self._digest, self._head = hashlib.sha256(), hashlib.sha256()
        self._head_left = HEAD_BYTES
        self._raw = self._stream = None

    def __enter__(self) -> "Lines":
        self.compression = kind = compression(self.path)
        self._raw = open(self.path, "rb")
        self.size = self.path.stat().st_size
        stream = COMPRESSED[kind](fileobj=self._raw) if kind == ".gz" else \
            COMPRESSED[kind](self._raw) if kind else self._raw
        try:
            self.encoding, bom = encoding_of(stream.peek(4)[:4])
            stream.read(bom)
        except _READ_ERRORS as err:
            self.close()
            raise ValueError(f"{self.path} line 1: {_read_error(err, 'utf-8')}") from None
        self._stream = stream if self.encoding == "utf-8" else \
            io.TextIOWrapper(stream, encoding=self.encoding, errors="strict", newline="\n")
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for f in (self._stream, self._raw):
            if f is not None:
                f.close()

    def position(self) -> int:
        """Bytes of the file (as stored, compressed or not) read so far."""
        return self._raw.tell()

    def _readline(self, size: int) -> bytes:
        piece = self._stream.readline(size)
        return piece if isinstance(piece, bytes) else piece.encode("utf-8")

    def _feed(self, data: bytes) -> None:
        self._digest.update(data)
        if self._head_left > 0:
            self._head.update(data[:self._head_left])
            self._head_left -= len(data)

    def __iter__(self) -> Iterator[tuple[int, bytes | Oversized]]:
        while True:
            try:
                raw = self._readline(self.limit + 2)  # room for "\r\n": a line of exactly the limit passes
            except _READ_ERRORS as err:
                raise ValueError(f"{self.path} line {self.lineno + 1}: {_read_error(err, self.encoding)}") from None
            if not raw:
                return
            self.lineno += 1
            self.ended = raw.endswith(b"\n")
            line = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1] if self.ended else raw
            if len(line) > self.limit:
                yield self.lineno, self._skip_rest(raw)
                continue
            if self.skip_blank and not line.strip():
                continue
            self._feed(line + b"\n")
            yield self.lineno, line

    def _skip_rest(self, piece: bytes) -> Oversized:
        """Read past an oversized line (``piece``: its start) in bounded pieces, hashing it as it
        goes; a '\\r' at the end of a piece is held back until the next one tells whether it is a line end."""
        size, carry = 0, b""
        while True:
            self.ended = piece.endswith(b"\n")
            body = carry + (piece[:-1] if self.ended else piece)
            carry = b""
            if body.endswith(b"\r"):
                body, carry = body[:-1], (b"" if self.ended else b"\r")
            size += len(body)
            self._feed(body)
            if self.ended:
                break
            try:
                piece = self._readline(CHUNK)
            except _READ_ERRORS as err:
                raise ValueError(f"{self.path} line {self.lineno}: {_read_error(err, self.encoding)}") from None
            if not piece:
                size += len(carry)
                self._feed(carry)
                break
        self._feed(b"\n")
        return Oversized(size, self.limit)

    def read(self, size: int) -> bytes:
        """Up to ``size`` more bytes (characters, for UTF-16/32) of the content as UTF-8, line ends
        as they are; a failed read is a ValueError naming the file."""
        try:
            data = self._stream.read(size)
        except _READ_ERRORS as err:
            raise ValueError(f"{self.path}: {_read_error(err, self.encoding)}") from None
        return data.encode("utf-8") if isinstance(data, str) else data

    def digest(self) -> str:
        """sha256 of the lines given so far (non-blank, line ends removed, each followed by '\\n')."""
        return self._digest.hexdigest()

    def head(self) -> str:
        """sha256 of the first :data:`HEAD_BYTES` of what :meth:`digest` hashes."""
        return self._head.hexdigest()

    def head_done(self) -> bool:
        return self._head_left <= 0


def content_digest(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> str:
    """:meth:`Lines.digest` of the whole file (one streaming pass, nothing parsed).

    Example:
        >>> import os, tempfile
        >>> a, b = (os.path.join(tempfile.mkdtemp(), n) for n in ("a", "b"))
        >>> _ = open(a, "wb").write(b"x\\r\\ny\\r\\n"), open(b, "wb").write(b"x\\ny")
        >>> content_digest(a) == content_digest(b)
        True
    """
    with Lines(path, max_line_bytes) as lines:
        for _ in lines:
            pass
        return lines.digest()


def content_head(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES) -> str:
    """:meth:`Lines.head` of the file: reads only its first :data:`HEAD_BYTES` of content (and the line
    they end in); equal heads are worth a full :func:`content_digest`.

    Example:
        >>> import os, tempfile
        >>> a = os.path.join(tempfile.mkdtemp(), "a")
        >>> _ = open(a, "wb").write(b"x\\n")
        >>> content_head(a) == content_digest(a)  # a file shorter than HEAD_BYTES: the whole content
        True
    """
    with Lines(path, max_line_bytes) as lines:
        for _ in lines:
            if lines.head_done():
                break
        return lines.head()


def read_document(path: str | Path, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The whole file as UTF-8 bytes (decompressed, decoded, a byte order mark dropped), refused when
    longer than ``max_bytes`` before it is read whole (a whole-file JSON is parsed at once).

    Example:
        >>> import os, tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "a.json")
        >>> _ = open(f, "wb").write("[1]".encode("utf-16"))
        >>> read_document(f, 100)
        b'[1]'
    """
    path = Path(path)
    with Lines(path) as lines:
        if lines.compression is None and lines.encoding == "utf-8" and lines.size > max_bytes + len(codecs.BOM_UTF8):
            data = None  # a plain file: its size says it, nothing need be read
        else:
            data = lines.read(max_bytes + 1)
        if data is None or len(data) > max_bytes:
            raise ValueError(f"{path}: longer than {max_bytes:,} bytes, the limit for a whole-file JSON (read at "
                             "once, about 5x its size in memory; max_json_bytes, ours): pass --max-json-bytes N to "
                             "allow it, or convert it to JSON lines")
        return data
