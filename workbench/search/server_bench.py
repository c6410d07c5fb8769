"""``workbench bench server``: the retrieval server under load, on loopback only.

Starts ``workbench serve-retriever`` in a child process (its own interpreter, so clients and
server do not share a GIL) over ``--db`` or, by default, a temporary synthetic store of
``--passages`` passages; or measures an already-running server at ``--url`` (127.0.0.1,
localhost or ::1 only). Every request is a single-query Search-R1 ``POST /retrieve`` with a
distinct query (cache misses, as in a rollout), over ``http.client``:

- ``sequential.new_connection``: ``--requests`` requests, one TCP connection each (what
  Search-R1's ``requests.post`` does); the baseline of every ratio;
- ``sequential.keep_alive``: the same on one persistent HTTP/1.1 connection (a pooled client);
- ``concurrent.<C>.new_connection`` / ``.keep_alive``: ``C`` clients (``--clients``, default 50
  and 200) released together by a barrier, ``--per-client`` requests each.

Each phase reports ``ok``, errors by kind (``reset``, ``refused``, ``timeout``, ``http_<code>``,
``other``), requests/s and p50/p99/max latency in ms; ratios are against the sequential
new-connection requests/s of the same run. ``goals`` checks the targets of issue 12: no error
at any concurrency, keep-alive at least as fast as new connections. The run is bounded:
``--seconds`` for all phases together (a phase past it stops early and says so) and
``--client-timeout`` per request; the child server is always stopped.

``--hostile`` adds two phases against slow and greedy clients (issue 39): ``slowloris``, real
clients' requests while ``Trickle`` holds 600 connections that each send a byte a second (more
than the server's 512), and ``greedy``, one request of 2,048 queries x topk 1,000 with the
server's peak memory (VmHWM) before and after it.

Example (CLI):
    workbench bench server --requests 300 --clients 50 200
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

LOOPBACK = ("127.0.0.1", "localhost", "::1")
WORDS = ("river port capital violin film drama island mountain prince queen harbour festival novel "
         "painter bridge castle desert forest glacier library museum orchestra poet saint temple "
         "valley village volcano war winter").split()


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, nearest rank) of ``values``; None when empty.

    Example:
        >>> percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50), percentile(list(range(1, 101)), 99)
        (3.0, 99)
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil without floats
    return ordered[int(rank) - 1]


def synthetic_store(path: Path, passages: int, seed: int = 0) -> None:
    """A store of ``passages`` seeded pseudo-English passages (one entity each) at ``path``."""
    from workbench import store

    rng = random.Random(seed)
    con = store.connect(path)
    try:
        ents = [(i, f"Entity {i}", "thing", "entity", "bench") for i in range(passages)]
        rows = [(i, i, 0, " ".join(rng.choice(WORDS) for _ in range(24)) + f" number {i}.") for i in range(passages)]
        con.executemany("INSERT INTO entities VALUES (?, ?, ?, ?, ?)", ents)
        con.executemany("INSERT INTO passages VALUES (?, ?, ?, ?)", rows)
    finally:
        con.close()


class Target:
    """Host, port and path of a loopback ``/retrieve`` URL; refuses any other host."""

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url if "//" in url else "http://" + url)
        if parts.scheme != "http" or parts.hostname not in LOOPBACK:
            raise ValueError(f"--url: the server bench sends traffic to loopback only "
                             f"(http://127.0.0.1:PORT), got {url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        path = parts.path.rstrip("/")
        self.path = path if path.endswith("/retrieve") else path + "/retrieve"
        self.url = f"http://{self.host}:{self.port}{self.path}"


def _body(i: int) -> bytes:
    rng = random.Random(i)
    query = " ".join(rng.choice(WORDS) for _ in range(4)) + f" {i}"  # distinct: a cache miss each
    return json.dumps({"queries": [query], "topk": 3, "return_scores": True}).encode()


def _error_kind(err: BaseException) -> str:
    if isinstance(err, ConnectionResetError) or isinstance(err, http.client.RemoteDisconnected):
        return "reset"
    if isinstance(err, ConnectionRefusedError):
        return "refused"
    if isinstance(err, (TimeoutError, socket.timeout)):
        return "timeout"
    if isinstance(err, BrokenPipeError):
        return "broken_pipe"
    return "other"


class Tally:
    """Outcomes and latencies of one phase (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.errors: dict[str, int] = {}
        self.examples: dict[str, str] = {}

    def ok(self, seconds: float) -> None:
        with self.lock:
            self.latencies.append(seconds)

    def fail(self, kind: str, detail: str) -> None:
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1
            self.examples.setdefault(kind, detail[:200])

    def report(self, wall: float, sent: int, stopped_early: bool) -> dict:
        ms = [s * 1000 for s in self.latencies]
        return {"requests": sent, "ok": len(ms), "errors": dict(sorted(self.errors.items())),
                "error_examples": dict(sorted(self.examples.items())), "seconds": round(wall, 4),
                "requests_per_s": round(len(ms) / wall, 1) if wall > 0 else None,
                "p50_ms": _round(percentile(ms, 50)), "p99_ms": _round(percentile(ms, 99)),
                "max_ms": _round(max(ms) if ms else None), "stopped_early": stopped_early}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


class Client:
    """One simulated client: ``keep_alive`` reuses one connection, else one connection a request."""

    def __init__(self, target: Target, keep_alive: bool, timeout: float):
        self.target, self.keep_alive, self.timeout = target, keep_alive, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, i: int, tally: Tally) -> None:
        headers = {"Content-Type": "application/json"}
        if not self.keep_alive:
            headers["Connection"] = "close"
        t0 = time.perf_counter()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.target.host, self.target.port, timeout=self.timeout)
            self.conn.request("POST", self.target.path, body=_body(i), headers=headers)
            response = self.conn.getresponse()
            data = response.read()
            if response.status != 200:
                tally.fail(f"http_{response.status}", data.decode("utf-8", "replace"))
            elif not isinstance(json.loads(data).get("result"), list):
                tally.fail("other", f"no result list: {data[:100]!r}")
            else:
                tally.ok(time.perf_counter() - t0)
            if not self.keep_alive or response.will_close:
                self.close()
        except (OSError, http.client.HTTPException, ValueError) as err:
            tally.fail(_error_kind(err), f"{type(err).__name__}: {err}")
            self.close()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def sequential(target: Target, keep_alive: bool, n: int, start: int, deadline: float, timeout: float) -> dict:
    """``n`` requests one after another from one client."""
    tally, client = Tally(), Client(target, keep_alive, timeout)
    t0 = time.perf_counter()
    sent = 0
    for i in range(n):
        if time.monotonic() > deadline:
            break
        client.request(start + i, tally)
        sent += 1
    wall = time.perf_counter() - t0
    client.close()
    return tally.report(wall, sent, sent < n)


def concurrent(target: Target, clients: int, per_client: int, keep_alive: bool, start: int,
               deadline: float, timeout: float) -> dict:
    """``clients`` threads released together, ``per_client`` requests each."""
    tally = Tally()
    barrier = threading.Barrier(clients + 1)
    sent = [0] * clients

    def work(c: int) -> None:
        client = Client(target, keep_alive, timeout)
        try:
            barrier.wait(timeout=60)
        except threading.BrokenBarrierError:
            return
        for r in range(per_client):
            if time.monotonic() > deadline:
                break
            client.request(start + c * per_client + r, tally)
            sent[c] += 1
        client.close()

    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    barrier.wait(timeout=60)
    t0 = time.perf_counter()
    for t in threads:
        # Each request is bounded by the client timeout; the join bound is a backstop.
        t.join(timeout=max(0.0, deadline - time.monotonic()) + timeout * per_client + 5)
    wall = time.perf_counter() - t0
    out = tally.report(wall, sum(sent), sum(sent) < clients * per_client)
    out["clients"] = clients
    return out


def start_server(db: str, index: str, log: Path, timeout: float = 120.0, flags: tuple[str, ...] = (),
                 open_files: int | None = None) -> tuple[subprocess.Popen, str]:
    """Run ``workbench serve-retriever --port 0`` (and ``flags``) over ``db`` in a child process;
    (process, URL). ``open_files`` caps the child's open-file limit (soft and hard), as
    ``ulimit -n`` would.

    Its stderr goes to the file ``log``: a pipe nobody reads while the bench runs would fill and
    stall a server that logs, distorting the very figures measured.
    """
    cmd = [sys.executable, "-m", "workbench.cli", "serve-retriever", "--db", db, "--index", index,
           "--host", "127.0.0.1", "--port", "0", *flags]

    def limit_files() -> None:  # runs in the child, before it starts Python
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    with open(log, "w") as stderr:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                preexec_fn=limit_files if open_files else None)
    found: list[str] = []
    reader = threading.Thread(target=lambda: found.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    line = found[0] if found else ""
    match = re.search(r"http://\S+/retrieve", line)
    if not match:
        stop_server(proc)
        err = log.read_text(errors="replace").strip().splitlines()
        raise RuntimeError(f"serve-retriever did not start within {timeout:.0f} s: "
                           f"{(err or [line.strip()])[-1][:300]}")
    return proc, match.group(0)


def stop_server(proc: subprocess.Popen) -> None:
    """Stop the child server (terminate, then kill after 10 s)."""
    proc.terminate()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


class Trickle:
    """``n`` slow clients (a slowloris) on one thread: each connection sends the head of a request
    one byte every ``every`` seconds and never finishes it; a connection the server closes is
    opened again (as an attacker would). ``source`` binds them to another local address
    (127.0.0.2: another client on loopback). Loopback only (``Target``); stopped by ``stop`` or
    the end of a ``with`` block.

    Example:
        >>> Trickle(Target("127.0.0.1:9"), 3, 1.0).n
        3
    """

    HEAD = b"POST /retrieve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: "

    def __init__(self, target: Target, n: int, every: float, source: str | None = None):
        self.target, self.n, self.every, self.source = target, int(n), float(every), source
        self.opened = self.reopened = 0
        self._socks: list[socket.socket | None] = [None] * self.n
        self._sent = [0] * self.n
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def open_now(self) -> int:
        """Slow connections open (as this side sees them)."""
        return sum(s is not None for s in self._socks)

    def _open(self, i: int) -> None:
        try:
            sock = socket.create_connection((self.target.host, self.target.port), timeout=0.5,
                                            source_address=(self.source, 0) if self.source else None)
        except OSError:
            return  # the backlog is full: try again next round
        sock.setblocking(False)
        self._socks[i], self._sent[i] = sock, 0
        self.opened += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            for i in range(self.n):
                if self._stop.is_set():
                    break
                if self._socks[i] is None:
                    self._open(i)
                    continue
                sent = self._sent[i]
                byte = self.HEAD[sent:sent + 1] or b"a"  # then the header's value never ends
                try:
                    self._socks[i].send(byte)
                    self._sent[i] += 1
                except BlockingIOError:
                    pass
                except OSError:  # closed by the server: open another
                    self._socks[i].close()
                    self._socks[i] = None
                    self.reopened += 1
                    self._open(i)
            self._stop.wait(self.every)

    def start(self) -> "Trickle":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for sock in self._socks:
            if sock is not None:
                sock.close()
        self._socks = [None] * self.n

    def __enter__(self) -> "Trickle":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def slowloris(target: Target, slow: int = 600, every: float = 1.0, real: int = 40, warmup: float = 3.0,
              timeout: float = 10.0) -> dict:
    """``real`` requests (one new connection each, one after another) while ``slow`` ``Trickle``
    clients hold connections; their outcomes and latencies (``Tally``)."""
    tally = Tally()
    with Trickle(target, slow, every) as trickle:
        time.sleep(warmup)  # the slow connections open and start trickling
        held = trickle.open_now
        client = Client(target, False, timeout)
        t0 = time.perf_counter()
        for i in range(real):
            client.request(20_000_000 + i, tally)
        wall = time.perf_counter() - t0
        out = tally.report(wall, real, False)
        out.update({"slow": slow, "slow_every_s": every, "slow_open_at_start": held,
                    "slow_open_at_end": trickle.open_now, "slow_reopened": trickle.reopened})
    return out


def peak_rss_mb(pid: int) -> dict | None:
    """A process's peak and current resident memory in MiB (Linux ``/proc``; None elsewhere).

    Example:
        >>> peak_rss_mb(os.getpid())["peak"] > 0
        True
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kib = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in status.splitlines())
           if k in ("VmHWM", "VmRSS")}
    return {"peak": kib["VmHWM"] // 1024, "now": kib["VmRSS"] // 1024}


def greedy(target: Target, pid: int | None = None, queries: int = 2048, topk: int = 1000,
           timeout: float = 600.0) -> dict:
    """One request of ``queries`` distinct queries x ``topk`` (Search-R1's maximal ask): its status,
    sizes and time, and the server process ``pid``'s memory (``peak_rss_mb``) before and after."""
    rng = random.Random(queries)
    body = json.dumps({"queries": [" ".join(rng.choice(WORDS) for _ in range(3)) + f" {i}" for i in range(queries)],
                       "topk": topk, "return_scores": True}).encode()
    before = peak_rss_mb(pid) if pid else None
    conn = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    t0 = time.perf_counter()
    try:
        conn.request("POST", target.path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    error = json.loads(data).get("error") if response.status != 200 else None
    return {"queries": queries, "topk": topk, "request_bytes": len(body), "status": response.status,
            "response_bytes": len(data), "seconds": round(time.perf_counter() - t0, 3), "error": error,
            "server_rss_mb_before": before, "server_rss_mb_after": peak_rss_mb(pid) if pid else None}


def run_phases(target: Target, requests: int, clients: list[int], per_client: int, seconds: float,
               timeout: float) -> dict:
    """Every phase of the module docstring against ``target``; ratios against new connections."""
    deadline = time.monotonic() + seconds
    sequential(target, True, 20, 10_000_000, deadline, timeout)  # warm-up: index pages, caches
    out: dict = {"sequential": {}, "concurrent": {}}
    seq = out["sequential"]
    seq["new_connection"] = sequential(target, False, requests, 0, deadline, timeout)
    seq["keep_alive"] = sequential(target, True, requests, requests, deadline, timeout)
    base = seq["new_connection"]["requests_per_s"] or None
    seq["keep_alive_vs_new_connection"] = _ratio(seq["keep_alive"]["requests_per_s"], base)
    start = 2 * requests
    for c in clients:
        row = {}
        for mode, keep in (("new_connection", False), ("keep_alive", True)):
            row[mode] = concurrent(target, c, per_client, keep, start, deadline, timeout)
            row[mode]["vs_sequential_new_connection"] = _ratio(row[mode]["requests_per_s"], base)
            start += c * per_client
        out["concurrent"][str(c)] = row
    phases = [seq["new_connection"], seq["keep_alive"]] + [p for r in out["concurrent"].values() for p in r.values()]
    out["goals"] = {
        "all_concurrent_answered": all(p["ok"] == p["requests"] == p["clients"] * per_client and not p["errors"]
                                       for r in out["concurrent"].values() for p in r.values()),
        "keep_alive_at_least_new_connection": bool(seq["keep_alive_vs_new_connection"] or 0) and
                                              seq["keep_alive_vs_new_connection"] >= 1.0,
        "errors": sum(sum(p["errors"].values()) for p in phases),
        "stopped_early": any(p["stopped_early"] for p in phases),
        "p99_ms_max": max((p["p99_ms"] for p in phases if p["p99_ms"] is not None), default=None),
    }
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def bench_server(db: str | None = None, passages: int = 2000, index: str = "bm25", url: str | None = None,
                 requests: int = 300, clients: tuple[int, ...] = (50, 200), per_client: int = 2,
                 seconds: float = 60.0, client_timeout: float = 10.0, hostile: bool = False) -> dict:
    """Load figures of the retrieval server (see the module docstring) as a dict: the store ``db``
    (default a synthetic one of ``passages`` passages) served by a new ``serve-retriever``, or the
    server already at ``url`` (loopback only). ``hostile`` adds the ``slowloris`` and ``greedy``
    phases (the server's memory only for a server the bench started).

    Example (CLI):
        workbench bench server --requests 300 --clients 50 200 --seconds 60
    """
    clients = [int(c) for c in clients]
    timeout = float(client_timeout)
    if requests < 1 or per_client < 1 or seconds <= 0 or timeout <= 0 or any(c < 1 or c > 2000 for c in clients):
        raise ValueError("--requests and --per-client must be at least 1, --seconds and --client-timeout "
                         "positive, each of --clients between 1 and 2000")
    out: dict = {"load_avg_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
                 "somaxconn": _somaxconn(), "requests": requests, "per_client": per_client,
                 "seconds_limit": seconds}
    if url:
        target = Target(url)
        out["server"] = {"url": target.url, "started_by_bench": False}
        out.update(run_phases(target, requests, clients, per_client, seconds, timeout))
        if hostile:
            out["hostile"] = {"slowloris": slowloris(target, timeout=timeout), "greedy": greedy(target)}
        return out
    with tempfile.TemporaryDirectory(prefix="wb-server-bench-") as tmp:
        given = db
        if db is None:
            if passages < 1:
                raise ValueError(f"--passages must be at least 1, got {passages}")
            db = str(Path(tmp) / "bench.duckdb")
            synthetic_store(Path(db), passages)
        elif not Path(db).exists():
            raise FileNotFoundError(f"--db: no store at {db}")
        log = Path(tmp) / "server.stderr"
        proc, url = start_server(db, index, log)
        out["server"] = {"url": url, "started_by_bench": True, "index": index,
                         "db": given or f"synthetic ({passages} passages)"}
        try:
            out.update(run_phases(Target(url), requests, clients, per_client, seconds, timeout))
            if hostile:
                out["hostile"] = {"slowloris": slowloris(Target(url), timeout=timeout),
                                  "greedy": greedy(Target(url), proc.pid)}
        finally:
            stop_server(proc)
        # A healthy server prints nothing while serving; a traceback flood would show here.
        err = log.read_text(errors="replace")
        out["server"]["stderr_lines"] = len(err.splitlines())
        out["server"]["stderr_tail"] = err[-400:]
    return out


def _somaxconn() -> int | None:
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return None
