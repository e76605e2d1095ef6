"""A scripted OpenAI-style streaming server for testing `mxserve bench serve`.

Each request is answered by the next script of a round-robin list. A script
says when each SSE chunk goes out, relative to the moment the request was
read: `ttft_ms` for the first choices chunk, then `gaps_ms[k]` between
chunks, each chunk carrying `tokens[k]` tokens; a usage chunk follows
`usage_delay_ms` after the last choices chunk (it must not count toward E2EL).
Chunks are scheduled on absolute times so sleeps never accumulate drift. Some
chunks are written in two halves to cross TCP packet boundaries, and a
keep-alive comment precedes the stream. The request bodies are recorded, and
so is what really happened: when each request was read and when each choices
chunk was actually written (a loaded machine can miss the script by ms). The
first chunk's text starts with "r<serial>|" so a client's generated text
identifies which request it was.
"""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Script:
    def __init__(self, ttft_ms, gaps_ms=(), tokens=None, usage_delay_ms=0.0, usage=True, status=200):
        self.status = status  # anything but 200: an OpenAI-style error body instead of a stream
        self.ttft_ms = ttft_ms
        self.gaps_ms = list(gaps_ms)
        self.tokens = list(tokens) if tokens is not None else [1] * (len(self.gaps_ms) + 1)
        assert len(self.tokens) == len(self.gaps_ms) + 1
        self.usage_delay_ms = usage_delay_ms
        self.usage = usage

    @property
    def completion_tokens(self):
        return sum(self.tokens)

    def chunk_offsets_ms(self):
        t = self.ttft_ms
        out = [t]
        for g in self.gaps_ms:
            t += g
            out.append(t)
        return out


class FakeOpenAIServer:
    def __init__(self, scripts):
        self.scripts = scripts
        self.bodies = []
        self.paths = []
        self.actual = {}  # serial -> {"received": t, "writes": [t, ...]} (time.monotonic)
        self._lock = threading.Lock()
        self._next = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                received = time.monotonic()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                serial, script = server._take(self.path, body)
                writes = []
                if script.status != 200:
                    error = json.dumps({"error": {"message": "scripted failure", "type": "server_error",
                                                  "param": None, "code": script.status}}).encode()
                    self.send_response(script.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error)
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self._write(b": keep-alive\n\n")
                chat = self.path.endswith("/chat/completions")
                offsets = script.chunk_offsets_ms()
                for k, (offset, ntok) in enumerate(zip(offsets, script.tokens)):
                    _sleep_until(received + offset / 1000.0)
                    text = ("r%d|" % serial if k == 0 else "") + "".join(" t%d" % j for j in range(ntok))
                    last = k == len(offsets) - 1
                    choice = ({"index": 0, "delta": {"content": text}} if chat
                              else {"index": 0, "text": text})
                    choice["finish_reason"] = "length" if last else None
                    event = b"data: " + json.dumps({"id": "x", "choices": [choice]}).encode() + b"\n\n"
                    writes.append(self._write(event, split=(k % 2 == 1)))
                if script.usage:
                    _sleep_until(received + (offsets[-1] + script.usage_delay_ms) / 1000.0)
                    usage = {"prompt_tokens": 1, "completion_tokens": script.completion_tokens,
                             "total_tokens": 1 + script.completion_tokens}
                    self._write(b"data: " + json.dumps({"id": "x", "choices": [], "usage": usage}).encode() + b"\n\n")
                server.actual[serial] = {"received": received, "writes": writes}
                self._write(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                self.close_connection = True

            def _write(self, data, split=False):
                """One HTTP chunk, optionally as two TCP writes mid-event. Returns
                the time taken just before the write that completes the event
                (a stamp after it could be late by a whole scheduling slice)."""
                framed = b"%x\r\n" % len(data) + data + b"\r\n"
                if split:
                    half = len(framed) // 2
                    self.wfile.write(framed[:half])
                    self.wfile.flush()
                    framed = framed[half:]
                stamp = time.monotonic()
                self.wfile.write(framed)
                self.wfile.flush()
                return stamp

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _take(self, path, body):
        with self._lock:
            serial = self._next
            script = self.scripts[serial % len(self.scripts)]
            self._next += 1
            self.bodies.append(body)
            self.paths.append(path)
            return serial, script

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _sleep_until(deadline):
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.002) if left < 0.004 else left - 0.002)
