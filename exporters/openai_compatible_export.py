"""Embed an embeval export through any OpenAI-compatible embeddings endpoint (`POST .../v1/embeddings`).

    python exporters/openai_compatible_export.py --export sentences/ --out api.h5 \\
        --url http://127.0.0.1:7997/v1 --model NAME [--api-key-env VAR] [--batch-size 64] \\
        [--concurrency 4] [--max-requests-per-minute R] [--dimensions D] [--prompt ROLE=TEXT ...] [--dry-run]

--url is the API's base (what OpenAI clients call base_url, e.g. https://api.openai.com/v1);
"/embeddings" is appended unless the URL already ends with it. Each distinct sentence is sent
once, in batches, by up to --concurrency requests at a time, no more than
--max-requests-per-minute request starts per minute (retries included). 429, 5xx, dropped
connections and time-outs are retried with exponential backoff and full jitter, waiting at least
what a Retry-After header asks. Every answered batch is appended at once to FILE.partial; a
rerun of the same command resumes from it and never sends those sentences again. An empty line
is sent as a single space (the API refuses empty strings). A --prompt of a role is prepended to
each sentence of that role's lists before sending (a sentence of two roles with different prompts
is two texts, each sent once) and recorded in the dataset's `prompt` attribute. The API key is
read from the environment variable named by --api-key-env and is never written, logged or shown
in an error. Standard library HTTP, numpy and h5py only.
"""

import base64
import binascii
import email.utils
import hashlib
import http.client
import json
import math
import os
import queue
import random
import socket
import ssl
import struct
import sys
import threading
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _format  # noqa: E402

PROG = "openai_compatible_export"
EMPTY_LINE = " "
CHARS_PER_TOKEN = 4
PARTIAL_FORMAT = "embeval-api-partial"
PARTIAL_VERSION = 1
RECORD_MAGIC = b"EAV1"
RECORD_HEAD = struct.Struct("<4sII")
CRC = struct.Struct("<I")
RETRY_STATUSES = {408, 409, 425, 429}
MAX_RETRY_AFTER = 600.0
DROPPED = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
BACKOFF_CAP = 60.0


class Secret:
    """The API key: sent in the Authorization header, scrubbed from every message."""

    def __init__(self, value):
        self.value = value or None

    def scrub(self, text):
        return text.replace(self.value, "[API key]") if self.value else text


class Endpoint:
    """The embeddings URL: scheme, host, port and path (with query); credentials in it are refused."""

    def __init__(self, url):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _format.ExportError(
                f"--url {url!r}: expected http(s)://HOST[:PORT]/PATH, e.g. http://127.0.0.1:7997/v1"
            )
        if parts.username or parts.password:
            raise _format.ExportError(
                "--url must not contain credentials; put the API key in an "
                "environment variable and pass --api-key-env VAR"
            )
        try:
            self.port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise _format.ExportError(f"--url {url!r}: bad port")
        self.scheme, self.hostname = parts.scheme, parts.hostname
        path = parts.path.rstrip("/")
        if not path.endswith("/embeddings"):
            path += "/embeddings"
        self.path = path + (f"?{parts.query}" if parts.query else "")
        self.host = parts.netloc
        self.display = f"{parts.scheme}://{parts.netloc}{path}"

    def connect(self, timeout):
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.hostname, self.port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.hostname, self.port, timeout=timeout)


class Transient(Exception):
    """A failure worth retrying: 429, 5xx, a dropped connection, a time-out, a garbled answer."""

    def __init__(self, reason, retry_after=None, unreachable=False):
        super().__init__(reason)
        self.reason, self.retry_after, self.unreachable = reason, retry_after, unreachable


def retry_after_seconds(headers):
    """Seconds asked by retry-after-ms or Retry-After (seconds or an HTTP date), or None."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return min(max(float(millis) / 1000, 0.0), MAX_RETRY_AFTER)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def server_message(body):
    """The error text of an API answer ({"error": {"message"}} or {"detail"}), on one short line."""
    text = body.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            err = obj.get("error", obj.get("detail", obj.get("message", obj)))
            if isinstance(err, dict):
                err = err.get("message", err)
            text = err if isinstance(err, str) else json.dumps(err)
    except ValueError:
        pass
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "") if text else "(empty answer)"


class Client:
    """One embeddings request per call, each thread on its own kept-alive connection."""

    def __init__(self, endpoint, model, secret, key_env, dimensions, timeout):
        self.endpoint, self.model, self.secret, self.key_env = endpoint, model, secret, key_env
        self.dimensions, self.timeout = dimensions, timeout
        self.local = threading.local()

    def _headers(self):
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": f"embeval-{PROG}"}
        if self.secret.value:
            headers["Authorization"] = f"Bearer {self.secret.value}"
        return headers

    def _drop(self):
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
        self.local.conn = None

    def _post(self, payload):
        """(status, lower-cased headers, body) of one POST; connection failures become Transient."""
        try:
            if getattr(self.local, "conn", None) is None:
                self.local.conn = self.endpoint.connect(self.timeout)
            self.local.conn.request("POST", self.endpoint.path, payload, self._headers())
            response = self.local.conn.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        except (ConnectionRefusedError, socket.gaierror) as err:
            self._drop()
            raise Transient(f"cannot connect ({err.strerror or err})", unreachable=True)
        except DROPPED:
            self._drop()
            raise
        except (http.client.HTTPException, OSError) as err:
            self._drop()
            raise Transient(
                f"connection failed ({type(err).__name__}: {err})"
                if str(err)
                else f"connection failed ({type(err).__name__})"
            )

    def embed(self, texts):
        """(vectors (n, d) float32, server-reported prompt tokens or None); raises Transient or ExportError."""
        body = {"model": self.model, "input": [t if t else EMPTY_LINE for t in texts], "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        reused = getattr(self.local, "conn", None) is not None
        try:
            try:
                status, headers, data = self._post(payload)
            except DROPPED:
                if not reused:
                    raise
                status, headers, data = self._post(payload)  # the server closed the kept-alive connection
        except DROPPED as err:
            raise Transient(f"connection dropped ({type(err).__name__})")
        if headers.get("connection", "").lower() == "close":
            self._drop()
        if status == 200:
            return self._parse(data, len(texts))
        message = self.secret.scrub(server_message(data))
        if status in RETRY_STATUSES or status >= 500:
            raise Transient(f"HTTP {status}: {message}", retry_after_seconds(headers))
        if status in (401, 403):
            sent = f"the key in ${self.key_env}" if self.secret.value else "no API key (pass --api-key-env VAR)"
            raise _format.ExportError(
                f"HTTP {status} from {self.endpoint.display}: the server refused {sent} ({message})"
            )
        raise _format.ExportError(f"HTTP {status} from {self.endpoint.display} for model {self.model!r}: {message}")

    def _parse(self, data, count):
        try:
            obj = json.loads(data)
            items = obj["data"]
            if not isinstance(items, list):
                raise TypeError("data is not a list")
        except (ValueError, KeyError, TypeError) as err:
            raise Transient(f"unreadable answer ({err})")
        if len(items) != count:
            raise _format.ExportError(
                f"{self.endpoint.display} returned {len(items)} vectors for a batch of {count} sentences"
            )
        try:
            order = sorted(range(count), key=lambda i: items[i].get("index", i))
            if sorted(items[i].get("index", i) for i in order) != list(range(count)):
                raise _format.ExportError(
                    f"{self.endpoint.display} returned vectors whose indices are not 0..{count - 1}"
                )
            rows = [self._vector(items[i]["embedding"]) for i in order]
        except (AttributeError, KeyError, TypeError, ValueError, binascii.Error) as err:
            raise _format.ExportError(
                f"{self.endpoint.display} returned a malformed vector ({type(err).__name__}: {err})"
            )
        dims = sorted({len(r) for r in rows})
        if len(dims) != 1 or dims[0] == 0:
            raise _format.ExportError(
                f"{self.endpoint.display} returned vectors of inconsistent dimensions "
                f"({', '.join(map(str, dims))}) in one batch"
            )
        vectors = np.stack(rows)
        if not np.isfinite(vectors).all():
            raise _format.ExportError(f"{self.endpoint.display} returned non-finite values")
        usage = obj.get("usage") if isinstance(obj, dict) else None
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return vectors, tokens if isinstance(tokens, int) else None

    @staticmethod
    def _vector(value):
        if isinstance(value, str):
            return np.frombuffer(base64.b64decode(value, validate=True), dtype="<f4").astype(np.float32)
        if not isinstance(value, list) or not all(isinstance(x, (int, float)) for x in value):
            raise TypeError("embedding is not a list of numbers")
        return np.asarray(value, dtype=np.float64).astype(np.float32)


class RateLimit:
    """Spaces request starts at least 60/R seconds apart; a Retry-After pauses every worker."""

    def __init__(self, per_minute):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.next = self.paused_until = 0.0
        self.lock = threading.Lock()

    def wait(self, stop):
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next, self.paused_until)
            self.next = start + self.interval
        if start > now:
            stop.wait(start - now)

    def pause(self, seconds):
        with self.lock:
            self.paused_until = max(self.paused_until, time.monotonic() + seconds)


def estimate_tokens(text):
    """A rough token count: one token per 4 characters, at least one."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class Partial:
    """FILE.partial: a JSON header line, then one checksummed record per answered batch.

    A record is b"EAV1", count and dimension (uint32), count uint32 sentence numbers (into the
    export's distinct sentences), count x dimension float32, then the CRC-32 of all of it. A torn
    last record (a crash mid-write) is cut off when the file is reopened.
    """

    def __init__(self, path, header):
        self.path, self.header = Path(path), header
        self.offsets = {}
        self.dim = None
        self.fd = None

    def open(self):
        """Read what an earlier run saved (checking it belongs to this export and model), then append."""
        expected = (json.dumps(self.header, sort_keys=True) + "\n").encode("utf-8")
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError as err:
            raise _format.ExportError(f"{self.path}: cannot read ({err.strerror})")
        if data is None or not data:
            self._start(expected)
            return self
        line_end = data.find(b"\n")
        try:
            header = json.loads(data[: line_end + 1]) if line_end >= 0 else None
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("format") != PARTIAL_FORMAT:
            raise _format.ExportError(f"{self.path}: not a partial file of this exporter; move it away")
        keys = ("export", "model", "url_host", "dimensions", "prompts")
        different = [k for k in keys if header.get(k) != self.header.get(k)]
        if different or header != self.header:
            raise _format.ExportError(
                f"{self.path}: saved by a run with another {', '.join(different) or 'version'}; "
                "delete it to start over, or rerun with the same export and options"
            )
        good = self._scan(data, line_end + 1)
        if good < len(data):
            try:
                os.truncate(self.path, good)
            except OSError as err:
                raise _format.ExportError(f"{self.path}: cannot cut a torn record ({err.strerror})")
        self._open_append()
        return self

    def _start(self, header_bytes):
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(header_bytes)
        except OSError as err:
            raise _format.ExportError(f"{self.path}: cannot write ({err.strerror})")
        self._open_append()

    def _open_append(self):
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as err:
            raise _format.ExportError(f"{self.path}: cannot write ({err.strerror})")

    def _scan(self, data, pos):
        """Index the whole records from pos on; return where the valid part ends."""
        total = self.header["count"]
        while pos + RECORD_HEAD.size <= len(data):
            magic, count, dim = RECORD_HEAD.unpack_from(data, pos)
            end = pos + RECORD_HEAD.size + 4 * count + 4 * count * dim + CRC.size
            if magic != RECORD_MAGIC or end > len(data) or count == 0 or dim == 0:
                break
            if CRC.unpack_from(data, end - CRC.size)[0] != zlib.crc32(data[pos : end - CRC.size]):
                break
            if self.dim is not None and dim != self.dim:
                raise _format.ExportError(
                    f"{self.path}: holds vectors of {self.dim} and {dim} dimensions; delete it to start over"
                )
            self.dim = dim
            numbers = np.frombuffer(data, dtype="<u4", count=count, offset=pos + RECORD_HEAD.size)
            if numbers.max() >= total:
                break
            first = pos + RECORD_HEAD.size + 4 * count
            for k, n in enumerate(numbers.tolist()):
                self.offsets[n] = first + 4 * dim * k
            pos = end
        return pos

    def append(self, numbers, vectors):
        count, dim = vectors.shape
        head = RECORD_HEAD.pack(RECORD_MAGIC, count, dim) + np.asarray(numbers, dtype="<u4").tobytes()
        first = os.fstat(self.fd).st_size + len(head)
        record = head + np.ascontiguousarray(vectors, dtype="<f4").tobytes()
        record += CRC.pack(zlib.crc32(record))
        view = memoryview(record)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.dim = dim
        for k, n in enumerate(numbers):
            self.offsets[n] = first + 4 * dim * k

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def vectors(self, numbers):
        """The saved vectors of these distinct-sentence numbers, (n, dim) float32."""
        table = np.memmap(self.path, dtype=np.uint8, mode="r")
        starts = np.asarray([self.offsets[n] for n in numbers], dtype=np.int64)
        rows = table[starts[:, None] + np.arange(4 * self.dim, dtype=np.int64)]
        return rows.view("<f4").astype(np.float32).reshape(len(numbers), self.dim)


class Progress(_format.Progress):
    """The exporters' progress (sentences/s), with an estimate of the tokens sent."""

    def __init__(self, total, done, quiet, plain_every=None):
        super().__init__(total, PROG, quiet, done=done, plain_every=plain_every)
        self.tokens = 0

    def update(self, sentences, tokens):
        self.tokens += tokens
        super().update(sentences, f"~{self.tokens:,} tokens sent")


class Embedder:
    """Sends the batches from a queue with K worker threads and hands the answers to the caller."""

    def __init__(self, client, limiter, concurrency, retries, backoff):
        self.client, self.limiter, self.concurrency = client, limiter, concurrency
        self.retries, self.backoff = retries, backoff
        self.stop = threading.Event()
        self.todo, self.results = queue.Queue(), queue.Queue()
        self.error = None
        self.succeeded = False
        self.requests = self.retried = 0
        self.server_tokens = None
        self.lock = threading.Lock()

    def fail(self, message):
        with self.lock:
            if self.error is None:
                self.error = message
        self.stop.set()

    def _send(self, texts):
        attempt = 0
        while True:
            self.limiter.wait(self.stop)
            if self.stop.is_set():
                return None
            with self.lock:
                self.requests += 1
            try:
                answer = self.client.embed(texts)
                self.succeeded = True
                return answer
            except Transient as err:
                if err.unreachable and not self.succeeded:
                    self.fail(f"cannot reach {self.client.endpoint.display}: {err.reason}; is the server running?")
                    return None
                attempt += 1
                if attempt > self.retries:
                    self.fail(
                        f"{self.client.endpoint.display}: still failing after {self.retries} retries ({err.reason})"
                    )
                    return None
                delay = random.uniform(0, min(BACKOFF_CAP, self.backoff * 2 ** (attempt - 1)))
                if err.retry_after is not None:
                    self.limiter.pause(err.retry_after)
                    delay = max(delay, err.retry_after)
                with self.lock:
                    self.retried += 1
                if self.stop.wait(delay):
                    return None
            except _format.ExportError as err:
                self.fail(str(err))
                return None

    def _work(self):
        while not self.stop.is_set():
            try:
                numbers, texts = self.todo.get_nowait()
            except queue.Empty:
                return
            answer = self._send(texts)
            if answer is None:
                return
            self.results.put((numbers, texts, answer))

    def run(self, batches, receive):
        """Send every (numbers, texts) batch; call receive(numbers, texts, vectors, tokens) in this thread."""
        for batch in batches:
            self.todo.put(batch)
        threads = [threading.Thread(target=self._work, daemon=True) for _ in range(min(self.concurrency, len(batches)))]
        for thread in threads:
            thread.start()
        pending = len(batches)
        try:
            while pending:
                try:
                    numbers, texts, (vectors, tokens) = self.results.get(timeout=0.2)
                except queue.Empty:
                    if not any(t.is_alive() for t in threads) and self.results.empty():
                        break
                    continue
                pending -= 1
                if tokens is not None:
                    self.server_tokens = (self.server_tokens or 0) + tokens
                try:
                    receive(numbers, texts, vectors)
                except _format.ExportError as err:
                    self.fail(str(err))
                    break
        finally:
            self.stop.set()
        if self.error is None and pending:
            self.error = "the workers stopped with batches left"
        return self.error


def distinct_sentences(jobs):
    """The export's distinct texts (sentences with their role's prompt) in first-seen order, and each
    one's number."""
    numbers, texts = {}, []
    for job in jobs:
        for sentence in job.texts():
            if sentence not in numbers:
                numbers[sentence] = len(texts)
                texts.append(sentence)
    return texts, numbers


def fingerprint(texts):
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8") + b"\n")
    return digest.hexdigest()


def make_batches(texts, skip, batch_size):
    """(numbers, texts) batches of the sentences not yet embedded, in export order."""
    todo = [n for n in range(len(texts)) if n not in skip]
    return [
        (todo[i : i + batch_size], [texts[n] for n in todo[i : i + batch_size]])
        for i in range(0, len(todo), batch_size)
    ]


def parse_args(argv):
    parser = _format.arguments(__doc__.splitlines()[0], prog=PROG)
    parser.add_argument(
        "--url", required=True, help='the API\'s base URL, e.g. http://127.0.0.1:7997/v1 ("/embeddings" is appended)'
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="model name sent with every request")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        default=None,
        help="environment variable holding the API key (sent as a Bearer token); without it no key is sent",
    )
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per request (default 64)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight at once (default 4)")
    parser.add_argument(
        "--max-requests-per-minute",
        type=float,
        default=0,
        metavar="R",
        help="at most R request starts per minute, retries included (default: no limit)",
    )
    parser.add_argument(
        "--dimensions",
        type=int,
        default=None,
        metavar="D",
        help="ask for D-dimensional vectors (the API's `dimensions` parameter)",
    )
    parser.add_argument("--retries", type=int, default=8, help="retries of one batch before giving up (default 8)")
    parser.add_argument(
        "--backoff",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="first retry delay; doubled on each retry, up to 60 s, with full jitter (default 1)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, metavar="SECONDS", help="time-out of one request (default 120)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the request count and token estimate, send nothing"
    )
    args = parser.parse_args(argv)
    if args.batch_size < 1 or args.concurrency < 1:
        raise _format.ExportError("--batch-size and --concurrency must be positive")
    if args.max_requests_per_minute < 0 or args.retries < 0 or args.backoff < 0 or args.timeout <= 0:
        raise _format.ExportError("--max-requests-per-minute, --retries and --backoff must be >= 0, --timeout > 0")
    if args.dimensions is not None and args.dimensions < 1:
        raise _format.ExportError("--dimensions must be positive")
    return args


def read_key(var):
    if var is None:
        return Secret(None)
    value = os.environ.get(var)
    if not value:
        raise _format.ExportError(f"--api-key-env {var}: that environment variable is not set or empty")
    return Secret(value.strip())


def dry_run(args, endpoint, jobs, texts, skip):
    batches = make_batches(texts, skip, args.batch_size)
    sentences = sum(len(j.sentences) for j in jobs)
    tokens = sum(estimate_tokens(t or EMPTY_LINE) for _, batch in batches for t in batch)
    line = (
        f"{PROG}: dry run: {sentences} sentences in {len(jobs)} list(s), {len(texts)} distinct, "
        f"{len(skip)} already embedded; would send {len(batches)} requests of up to {args.batch_size} "
        f"sentences ({sum(len(b) for _, b in batches)} sentences) to {endpoint.display} "
        f"(model {args.model!r}), about {tokens:,} tokens (estimated at {CHARS_PER_TOKEN} characters per token)"
    )
    if args.max_requests_per_minute and batches:
        line += (
            f"; at {args.max_requests_per_minute:g} requests/minute at least "
            f"{60 * (len(batches) - 1) / args.max_requests_per_minute:.0f} s"
        )
    print(line)


def main(argv=None):
    args = parse_args(argv)
    endpoint = Endpoint(args.url)
    prompts = _format.parse_prompts(args.prompt)
    if not args.dry_run:
        out = _format.check_output(args.out, args.overwrite)
    jobs = _format.read_export(args.export)
    _format.apply_prompts(jobs, prompts, PROG, args.quiet)
    texts, numbers = distinct_sentences(jobs)
    out = Path(args.out)
    header = {
        "format": PARTIAL_FORMAT,
        "version": PARTIAL_VERSION,
        "export": fingerprint(texts),
        "count": len(texts),
        "model": args.model,
        "url_host": endpoint.host,
        "dimensions": args.dimensions,
    }
    used = {job.role: job.prompt for job in jobs if job.prompt}
    if used:  # absent without prompts: a partial file of an earlier version still resumes
        header["prompts"] = dict(sorted(used.items()))
    partial = Partial(out.with_name(out.name + ".partial"), header)
    if args.dry_run:
        if partial.path.is_file():
            partial.open().close()
        dry_run(args, endpoint, jobs, texts, set(partial.offsets))
        return
    secret = read_key(args.api_key_env)
    try:
        _export(args, endpoint, jobs, texts, numbers, partial, secret, out)
    except _format.ExportError as err:
        raise _format.ExportError(secret.scrub(str(err)))


def _export(args, endpoint, jobs, texts, numbers, partial, secret, out):
    if not texts:
        raise _format.ExportError(f"{args.export}: the export has no sentences to embed")
    partial.open()
    resumed = len(partial.offsets)
    batches = make_batches(texts, partial.offsets, args.batch_size)
    if resumed and not args.quiet:
        print(
            f"{PROG}: resuming from {partial.path}: {resumed} of {len(texts)} distinct sentences already "
            f"embedded, {len(batches)} requests to go",
            file=sys.stderr,
        )
    client = Client(endpoint, args.model, secret, args.api_key_env, args.dimensions, args.timeout)
    embedder = Embedder(client, RateLimit(args.max_requests_per_minute), args.concurrency, args.retries, args.backoff)
    progress = Progress(len(texts), resumed, args.quiet, args.progress_every)
    want = args.dimensions or partial.dim

    def receive(batch_numbers, batch_texts, vectors):
        nonlocal want
        if args.dimensions and vectors.shape[1] != args.dimensions:
            raise _format.ExportError(
                f"asked for {args.dimensions} dimensions, {endpoint.display} returned {vectors.shape[1]}"
            )
        if want is not None and vectors.shape[1] != want:
            raise _format.ExportError(
                f"{endpoint.display} returned vectors of inconsistent dimensions ({want}, then {vectors.shape[1]})"
            )
        want = vectors.shape[1]
        partial.append(batch_numbers, vectors)
        progress.update(len(batch_numbers), sum(estimate_tokens(t or EMPTY_LINE) for t in batch_texts))

    try:
        error = embedder.run(batches, receive) if batches else None
    except KeyboardInterrupt:
        embedder.stop.set()
        raise
    finally:
        progress.close()
        partial.close()
    if error is not None:
        saved = len(partial.offsets)
        raise _format.ExportError(
            f"{error} ({saved} of {len(texts)} distinct sentences are saved in {partial.path}; rerun to resume)"
        )
    attrs = {"exporter": PROG, "url_host": endpoint.host, "model": args.model, "dimensions": partial.dim}
    _format.write_vectors(
        out,
        jobs,
        partial.dim,
        lambda batch: partial.vectors([numbers[s] for s in batch]),
        8192,
        f"{PROG} (writing)",
        True,
        attrs=attrs,
    )
    partial.path.unlink()
    if not args.quiet:
        tokens = (
            f"{embedder.server_tokens:,} tokens reported by the server"
            if embedder.server_tokens is not None
            else "no token usage reported"
        )
        print(
            f"{PROG}: wrote {out} ({', '.join(j.name for j in jobs)}; dim {partial.dim}; "
            f"{len(texts) - resumed} sentences in {embedder.requests} requests, {embedder.retried} retried; "
            f"{tokens})",
            file=sys.stderr,
        )


if __name__ == "__main__":
    _format.run(main, PROG)
