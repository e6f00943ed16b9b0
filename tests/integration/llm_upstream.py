#!/usr/bin/env python3
"""llm_upstream.py: a mock LLM provider for the budget integration scripts
(tests/integration/2xx-budget-*.sh). Standard library only.

  llm_upstream.py -P PORTFILE -l LOG [-C CERT -K KEY] [-d DELAY_MS]
                  [-f FIXTURE_DIR]

Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE), plain HTTP
or, with -C/-K, TLS. HTTP/1.1 with keep-alive; request bodies framed by
Content-Length or chunked.

It replays the recorded provider responses of ../shared/testdata/llm
(MANIFEST.json; found from this file's place in the source tree, or -f).
When that directory is absent, a few fixtures embedded below take its
place (same names under "embedded/", same MANIFEST shape), so that the
scripts still run.

Every request is appended to LOG as one JSON line, written and flushed
when the request has been read whole (before any delay or answer):
  {"seq", "conn", "t", "method", "path", "headers": {lowercase: value},
   "body": latin-1 text of the decoded body}

Routing, per request:
  POST /v1/chat/completions   an OpenAI chat completion, SSE when the body
                              has "stream": true, else JSON
  POST /v1/responses          an OpenAI Responses API result (JSON)
  POST /v1/messages           an Anthropic message (SSE when "stream": true)
GET .../models answers a model list. The fixture can be chosen with "X-Fixture: openai/chat_completions_...sse"
(a MANIFEST "file"); status and Content-Type follow the fixture
(MANIFEST http_status, .sse = text/event-stream).

"X-Synth: openai" (or "responses", "anthropic") makes an answer up instead:
a chat completion (or Responses API result, Anthropic message) whose usage is "X-Synth-Usage: P,C[,R[,W]]"
("X-Synth-Usage: none": a chat completion without usage; "X-Synth: compat":
an OpenAI-compatible server's stream, usage in the finishing chunk whatever
stream_options says; "X-Synth: long": X-Synth-Usage P,N,STEP, N content
chunks each with the usage so far, P prompt and STEP more output tokens a
chunk; "X-Synth: llama", "stale", "anthropic-nodelta": answers without
their whole bill, synth_partial(); "X-Synth: gemini-long": a Gemini stream
with usage in every chunk, synth_gemini_long())
(prompt, completion, cached/cache-read, cache-write tokens) or, without it,
P = the request body's length in bytes and C = its max_tokens (or
max_completion_tokens / max_output_tokens, else 0): exactly the worst case
the gateway reserves for it. The model is the request's. SSE when the
request streams; like OpenAI's, a synthesized chat completion stream has a
usage chunk only when the request asked for it (stream_options.include_usage).

Delivery: JSON answers with Content-Length, SSE answers chunked; either way
the body goes out in awkward fragments of 1-7 bytes (one write, and for
chunked one chunk, each; cut inside "data:" field names, between CR and LF,
inside "usage"), with short sleeps. Request headers may change that:
  X-Framing: length | chunked | close      body framing
  X-Frag: none                             the body in one write
  X-Newlines: crlf                         SSE lines end in CRLF
  X-Delay-Ms: N                            wait N ms before the answer
                                           (default -d)
  X-Cut-After: N                           send N body bytes, then close
                                           the connection mid-body

Compression, like the real APIs (behind Cloudflare or Google's front
ends): when the request's Accept-Encoding accepts br, gzip or deflate, the
body is sent in the first of those it accepts (br preferred, then gzip,
then deflate), Content-Encoding set, SSE included (compressed as one
stream, then fragmented like any body). Identity otherwise, or with
  X-Encoding: identity | gzip | deflate | br | zstd
which forces a coding (zstd: a made-up body the meter cannot read, as an
unknown coding would be). X-Cut-After then counts encoded bytes.

Gemini: POST .../models/M:generateContent answers
gemini/generate_content_nonstream.json, ...:streamGenerateContent the JSON
array gemini/stream_generate_content_array.json, or with ?alt=sse
gemini/stream_generate_content_sse.sse (tests/data/llm, in the tree).
"""

import argparse
import gzip
import json
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
import zlib

try:
    import brotli  # Debian python3-brotli
except ImportError:
    brotli = None

HERE = os.path.dirname(os.path.abspath(__file__))
# tests/integration -> tests -> top_srcdir -> its parent holds shared/
INTREE_FIXTURES = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "data", "llm"))
DEFAULT_FIXTURES = os.path.normpath(os.path.join(
    HERE, "..", "..", "..", "shared", "testdata", "llm"))

# ---------------------------------------------------------------------------
# Embedded fixtures: the fallback when ../shared/testdata/llm is absent.
# Written for these tests (not recordings), shaped like the providers'.

_EMB_OPENAI_STREAM = "".join(
    "data: %s\n\n" % json.dumps(o, separators=(",", ":")) for o in [
        {"id": "chatcmpl-emb1", "object": "chat.completion.chunk",
         "created": 1700000000, "model": "gpt-4o-2024-08-06",
         "choices": [{"index": 0, "delta": {"role": "assistant",
                                            "content": ""},
                      "finish_reason": None}]},
        {"id": "chatcmpl-emb1", "object": "chat.completion.chunk",
         "created": 1700000000, "model": "gpt-4o-2024-08-06",
         "choices": [{"index": 0, "delta": {"content": "Hello there"},
                      "finish_reason": None}]},
        {"id": "chatcmpl-emb1", "object": "chat.completion.chunk",
         "created": 1700000000, "model": "gpt-4o-2024-08-06",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"id": "chatcmpl-emb1", "object": "chat.completion.chunk",
         "created": 1700000000, "model": "gpt-4o-2024-08-06", "choices": [],
         "usage": {"prompt_tokens": 23, "completion_tokens": 7,
                   "total_tokens": 30,
                   "completion_tokens_details": {"reasoning_tokens": 0}}},
    ]) + "data: [DONE]\n\n"

_EMB_OPENAI_JSON = json.dumps({
    "id": "chatcmpl-emb2", "object": "chat.completion",
    "created": 1700000000, "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "message": {"role": "assistant",
                                         "content": "Hi."},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 41, "completion_tokens": 12,
              "total_tokens": 53,
              "completion_tokens_details": {"reasoning_tokens": 0}}},
    indent=2)

_EMB_RESPONSES_JSON = json.dumps({
    "id": "resp_emb3", "object": "response", "status": "completed",
    "model": "gpt-4o-mini-2024-07-18", "max_output_tokens": None,
    "output": [{"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Sure."}]}],
    "usage": {"input_tokens": 18, "input_tokens_details":
              {"cached_tokens": 0, "cache_write_tokens": 0},
              "output_tokens": 33,
              "output_tokens_details": {"reasoning_tokens": 0},
              "total_tokens": 51}})

_EMB_ANTHROPIC_STREAM = "".join(
    "event: %s\ndata: %s\n\n" % (o["type"], json.dumps(
        o, separators=(",", ":"))) for o in [
        {"type": "message_start", "message": {
            "id": "msg_emb4", "type": "message", "role": "assistant",
            "content": [], "model": "claude-sonnet-4-5-20250929",
            "stop_reason": None, "usage": {
                "input_tokens": 25, "cache_creation_input_tokens": 10,
                "cache_read_input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Hello"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ])

_EMB_ANTHROPIC_JSON = json.dumps({
    "id": "msg_emb5", "type": "message", "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hi."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 222, "cache_creation_input_tokens": 40,
              "cache_read_input_tokens": 60, "output_tokens": 14}},
    indent=1)

EMBEDDED = {
    "embedded/openai_chat_stream.sse": _EMB_OPENAI_STREAM,
    "embedded/openai_chat.json": _EMB_OPENAI_JSON,
    "embedded/openai_responses.json": _EMB_RESPONSES_JSON,
    "embedded/anthropic_stream.sse": _EMB_ANTHROPIC_STREAM,
    "embedded/anthropic.json": _EMB_ANTHROPIC_JSON,
}

EMBEDDED_MANIFEST = [
    {"file": "embedded/openai_chat_stream.sse", "provider": "openai",
     "api": "chat.completions", "stream": True,
     "expected_usage": {"prompt_tokens": 23, "completion_tokens": 7,
                        "total_tokens": 30}},
    {"file": "embedded/openai_chat.json", "provider": "openai",
     "api": "chat.completions", "stream": False,
     "expected_usage": {"prompt_tokens": 41, "completion_tokens": 12,
                        "total_tokens": 53}},
    {"file": "embedded/openai_responses.json", "provider": "openai",
     "api": "responses", "stream": False,
     "expected_usage": {"input_tokens": 18, "input_tokens_details":
                        {"cached_tokens": 0, "cache_write_tokens": 0},
                        "output_tokens": 33, "total_tokens": 51}},
    {"file": "embedded/anthropic_stream.sse", "provider": "anthropic",
     "api": "messages", "stream": True,
     "expected_usage": {"message_start.usage": {
         "input_tokens": 25, "cache_creation_input_tokens": 10,
         "cache_read_input_tokens": 5, "output_tokens": 1},
         "final message_delta.usage": {"output_tokens": 9}}},
    {"file": "embedded/anthropic.json", "provider": "anthropic",
     "api": "messages", "stream": False,
     "expected_usage": {"input_tokens": 222,
                        "cache_creation_input_tokens": 40,
                        "cache_read_input_tokens": 60,
                        "output_tokens": 14}},
]


class Fixtures:
    """The fixture set: the shared directory when present, else the
    embedded one."""

    def __init__(self, directory=None):
        d = directory or os.environ.get("LLM_FIXTURES") or DEFAULT_FIXTURES
        self.dir = None
        if os.path.isfile(os.path.join(d, "MANIFEST.json")):
            self.dir = d
            with open(os.path.join(d, "MANIFEST.json")) as f:
                self.manifest = json.load(f)
        else:
            self.manifest = EMBEDDED_MANIFEST
        self.by_file = {e["file"]: e for e in self.manifest}

    @property
    def embedded(self):
        return self.dir is None

    def data(self, name):
        """The fixture's bytes, or None."""
        if name in EMBEDDED:
            return EMBEDDED[name].encode()
        if name.startswith("gemini/") and "/.." not in name:
            try:
                with open(os.path.join(INTREE_FIXTURES, name), "rb") as f:
                    return f.read()
            except OSError:
                return None
        if self.dir is None or name not in self.by_file:
            return None
        with open(os.path.join(self.dir, name), "rb") as f:
            return f.read()

    def entry(self, name):
        return self.by_file.get(name) or next(
            (e for e in EMBEDDED_MANIFEST if e["file"] == name), None)

    def default(self, path, stream, query=""):
        """A fixture name for an API path when X-Fixture is absent."""
        if path.endswith(":generateContent"):
            return "gemini/generate_content_nonstream.json"
        if path.endswith(":streamGenerateContent"):
            if "alt=sse" in query:
                return "gemini/stream_generate_content_sse.sse"
            return "gemini/stream_generate_content_array.json"
        want = {"/v1/chat/completions": ("chat.completions", "openai"),
                "/v1/responses": ("responses", "openai"),
                "/v1/messages": ("messages", "anthropic")}.get(path)
        if want is None:
            return None
        for man in (self.manifest, EMBEDDED_MANIFEST):
            for e in man:
                if (e.get("api"), e.get("provider")) == want and \
                        bool(e.get("stream")) == bool(stream) and \
                        e.get("http_status", 200) == 200:
                    return e["file"]
        for e in EMBEDDED_MANIFEST:
            if (e.get("api"), e.get("provider")) == want:
                return e["file"]
        return None


def choose_coding(h):
    """The content coding of the answer (see the module doc)."""
    forced = h.get("x-encoding", "").strip().lower()
    if forced:
        return forced
    acc = {}
    for part in h.get("accept-encoding", "").split(","):
        name, _, params = part.strip().partition(";")
        q = 1.0
        m = re.search(r"q\s*=\s*([0-9.]+)", params)
        if m:
            q = float(m.group(1))
        if name:
            acc[name.strip().lower()] = q
    for c in ("br", "gzip", "deflate"):
        if acc.get(c, 0) > 0 and (c != "br" or brotli is not None):
            return c
    return "identity"


def encode_body(coding, body):
    if coding == "gzip":
        return gzip.compress(body, 6)
    if coding == "deflate":
        return zlib.compress(body, 6)
    if coding == "br":
        return brotli.compress(body, quality=5)
    if coding == "zstd":
        return b"\x28\xb5\x2f\xfd" + body[::-1]
    return body


def fixture_model(data):
    """The first "model" value in a fixture's text ("" when none)."""
    m = re.search(rb'"model"\s*:\s*"([^"]*)"', data) or re.search(
        rb'"modelVersion"\s*:\s*"([^"]*)"', data)
    return m.group(1).decode() if m else ""


# ---------------------------------------------------------------------------
# Fragmenting


def fragments(data, seed, lo=1, hi=7):
    """<data> cut into pieces of lo..hi bytes, with forced cuts between CR
    and LF, after "da" of "data:", and after '"us' of '"usage"'."""
    rnd = random.Random(seed)
    forced = set()
    for pat, off in ((b"\r\n", 1), (b"data:", 2), (b'"usage"', 3),
                     (b"event:", 3), (b"\n\n", 1)):
        i = data.find(pat)
        while i >= 0:
            forced.add(i + off)
            i = data.find(pat, i + 1)
    forced = sorted(forced)
    out = []
    i = 0
    fi = 0
    while i < len(data):
        n = rnd.randint(lo, hi)
        while fi < len(forced) and forced[fi] <= i:
            fi += 1
        end = i + n
        if fi < len(forced) and forced[fi] < end:
            end = forced[fi]
        out.append(data[i:end])
        i = end
    return out


# ---------------------------------------------------------------------------
# Synthesized answers


def _max_out(req):
    for k in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        v = req.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


def synth_long(req, usage_hdr):
    """X-Synth: long: an OpenAI-compatible stream of N content chunks,
    each with the usage so far (vLLM's continuous_usage_stats): "X-Synth-
    Usage: P,N,STEP" (prompt tokens, chunks, output tokens per chunk)."""
    p, n, step = [int(x) for x in (usage_hdr or "10,20,1").split(",")]
    model = req.get("model") if isinstance(req.get("model"), str) else ""
    out = []
    for i in range(1, n + 1):
        out.append({"id": "chatcmpl-long", "object": "chat.completion.chunk",
                    "model": model, "choices": [{
                        "index": 0, "delta": {"content": "w%d " % i},
                        "finish_reason": None if i < n else "stop"}],
                    "usage": {"prompt_tokens": p,
                              "completion_tokens": i * step,
                              "total_tokens": p + i * step}})
    return "text/event-stream", ("".join(
        "data: %s\n\n" % json.dumps(o) for o in out) +
        "data: [DONE]\n\n").encode()


def synth_partial(kind, req, p, c):
    """X-Synth: llama (llama.cpp's own /completion: no "usage", its
    tokens_evaluated / tokens_predicted counts; SSE when streaming),
    "stale" (an OpenAI-compatible stream whose usage came on its first
    chunk only, text after it) or "anthropic-nodelta" (an Anthropic stream
    without message_delta's output count)."""
    model = req.get("model") if isinstance(req.get("model"), str) else ""
    if kind == "llama":
        last = {"content": "", "model": model, "stop": True,
                "tokens_predicted": c, "tokens_evaluated": p,
                "timings": {"prompt_n": p, "predicted_n": c,
                            "predicted_ms": 3.5}}
        if req.get("stream") is not True:
            return "application/json", json.dumps(
                dict(last, content="ok ok")).encode()
        evs = [{"content": "ok", "stop": False},
               {"content": " ok", "stop": False}, last]
        return "text/event-stream", "".join(
            "data: %s\n\n" % json.dumps(o) for o in evs).encode()
    if kind == "stale":
        evs = [{"object": "chat.completion.chunk", "model": model,
                "choices": [{"index": 0, "delta": {"content": "a"}}],
                "usage": {"prompt_tokens": p, "completion_tokens": 1}},
               {"object": "chat.completion.chunk", "model": model,
                "choices": [{"index": 0, "delta": {"content": "bcdef"}}]}]
        return "text/event-stream", ("".join(
            "data: %s\n\n" % json.dumps(o) for o in evs) +
            "data: [DONE]\n\n").encode()
    evs = [("message_start", {"type": "message_start", "message": {
        "id": "msg_synth", "type": "message", "role": "assistant",
        "content": [], "model": model, "usage": {"input_tokens": p,
                                                 "output_tokens": 1}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta",
                                           "text": "ok"}}),
        ("message_stop", {"type": "message_stop"})]
    return "text/event-stream", "".join(
        "event: %s\ndata: %s\n\n" % (n, json.dumps(o))
        for n, o in evs).encode()


def synth_gemini_long(path, usage_hdr):
    """X-Synth: gemini-long: a Gemini stream of N chunks, each with its
    usageMetadata so far ("X-Synth-Usage: P,N,STEP"), a JSON array (the
    elements apart by ",\r\n" as Google's front ends send them) or SSE
    with ?alt=sse."""
    p, n, step = [int(x) for x in (usage_hdr or "10,20,1").split(",")]
    out = [{"candidates": [{"content": {"parts": [{"text": "w%d " % i}],
                                        "role": "model"}, "index": 0}],
            "usageMetadata": {"promptTokenCount": p,
                              "candidatesTokenCount": i * step,
                              "totalTokenCount": p + i * step},
            "modelVersion": "gemini-2.5-flash"} for i in range(1, n + 1)]
    if "alt=sse" in path:
        return "text/event-stream", "".join(
            "data: %s\r\n\r\n" % json.dumps(o) for o in out).encode()
    return "application/json; charset=UTF-8", ("[" + ",\r\n".join(
        json.dumps(o, indent=2) for o in out) + "]").encode()


def synth(kind, req, body, usage_hdr, path=""):
    """(content type, body bytes) for X-Synth."""
    if kind == "long":
        return synth_long(req, usage_hdr)
    if kind == "gemini-long":
        return synth_gemini_long(path, usage_hdr)
    model = req.get("model") if isinstance(req.get("model"), str) else ""
    stream = req.get("stream") is True
    no_usage = (usage_hdr or "").strip().lower() == "none"
    if usage_hdr and not no_usage:
        nums = [int(x) for x in usage_hdr.split(",")]
    else:
        nums = [len(body), _max_out(req)]
    nums += [0] * (4 - len(nums))
    p, c, cached, write = nums[:4]
    if kind in ("llama", "stale", "anthropic-nodelta"):
        return synth_partial(kind, req, p, c)
    if kind == "anthropic":
        # Anthropic's input_tokens leaves the cache tokens out
        usage = {"input_tokens": p - cached - write,
                 "cache_creation_input_tokens": write,
                 "cache_read_input_tokens": cached, "output_tokens": c}
        if not stream:
            return "application/json", json.dumps({
                "id": "msg_synth", "type": "message", "role": "assistant",
                "model": model, "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "usage": usage}).encode()
        start = dict(usage, output_tokens=1)
        evs = [("message_start", {"type": "message_start", "message": {
            "id": "msg_synth", "type": "message", "role": "assistant",
            "content": [], "model": model, "usage": start}}),
            ("content_block_start", {"type": "content_block_start",
                                     "index": 0, "content_block": {
                                         "type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta",
                                     "index": 0, "delta": {
                                         "type": "text_delta",
                                         "text": "ok"}}),
            ("content_block_stop", {"type": "content_block_stop",
                                    "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {
                "stop_reason": "end_turn"}, "usage": {"output_tokens": c}}),
            ("message_stop", {"type": "message_stop"})]
        return "text/event-stream", "".join(
            "event: %s\ndata: %s\n\n" % (n, json.dumps(o))
            for n, o in evs).encode()
    if kind == "responses":
        return "application/json", json.dumps({
            "id": "resp_synth", "object": "response", "status": "completed",
            "model": model, "output": [{
                "type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": "ok"}]}],
            "usage": {"input_tokens": p, "input_tokens_details": {
                "cached_tokens": cached}, "output_tokens": c,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": p + c}}).encode()
    usage = {"prompt_tokens": p, "completion_tokens": c,
             "total_tokens": p + c,
             "prompt_tokens_details": {"cached_tokens": cached}}
    if not stream:
        o = {"id": "chatcmpl-synth", "object": "chat.completion",
             "model": model, "choices": [{
                 "index": 0, "message": {"role": "assistant",
                                         "content": "ok"},
                 "finish_reason": "stop"}], "usage": usage}
        if no_usage:
            del o["usage"]
        return "application/json", json.dumps(o).encode()
    chunks = [{"id": "chatcmpl-synth", "object": "chat.completion.chunk",
               "model": model, "choices": [{
                   "index": 0, "delta": {"role": "assistant",
                                         "content": "ok"},
                   "finish_reason": None}]},
              {"id": "chatcmpl-synth", "object": "chat.completion.chunk",
               "model": model, "choices": [{
                   "index": 0, "delta": {}, "finish_reason": "stop"}]},
              {"id": "chatcmpl-synth", "object": "chat.completion.chunk",
               "model": model, "choices": [], "usage": usage}]
    if kind == "compat":
        # an OpenAI-compatible server (llama.cpp, Together): usage in the
        # chunk that finishes, stream_options ignored, timings added
        chunks.pop()
        chunks[-1]["usage"] = usage
        chunks[-1]["timings"] = {"prompt_n": p, "predicted_n": c,
                                 "predicted_ms": 12.5}
        chunks.insert(0, {"id": "chatcmpl-synth", "object":
                          "chat.completion.chunk", "model": model,
                          "choices": [{"index": 0, "delta": {"role":
                                       "assistant"}}], "usage": None})
        return "text/event-stream", (": keep-alive\n\n" + "".join(
            "data: %s\n\n" % json.dumps(o) for o in chunks) +
            "data: [DONE]\n\n").encode()
    so = req.get("stream_options")
    if not (isinstance(so, dict) and so.get("include_usage") is True):
        # like OpenAI: no usage chunk unless it was asked for
        chunks.pop()
    return "text/event-stream", ("".join(
        "data: %s\n\n" % json.dumps(o) for o in chunks) +
        "data: [DONE]\n\n").encode()


# ---------------------------------------------------------------------------
# The server


class Bad(Exception):
    pass


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        d = self.sock.recv(65536)
        if not d:
            return False
        self.buf += d
        return True

    def take(self, n):
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def readline(self):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                return self.take(i + 1)
            if not self.fill():
                raise EOFError
            if len(self.buf) > 1 << 20:
                raise Bad("line too long")

    def read(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise EOFError
        return self.take(n)


STATUS_TEXT = {200: "OK", 400: "Bad Request", 404: "Not Found",
               429: "Too Many Requests", 500: "Internal Server Error"}


class Server:
    def __init__(self, args):
        self.args = args
        self.fx = Fixtures(args.fixtures)
        self.lock = threading.Lock()
        self.seq = 0
        self.nconn = 0
        self.log = open(args.log, "a")
        self.ctx = None
        if args.cert:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(args.cert, args.key)
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", args.port))
        self.srv.listen(256)
        port = self.srv.getsockname()[1]
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)

    def record(self, cid, method, path, hdrs, body):
        with self.lock:
            self.seq += 1
            rec = {"seq": self.seq, "conn": cid, "t": time.time(),
                   "method": method, "path": path,
                   "headers": {k.lower(): v for k, v in hdrs},
                   "body": body.decode("latin-1")}
            self.log.write(json.dumps(rec) + "\n")
            self.log.flush()
            return self.seq

    def serve_forever(self):
        while True:
            c, _ = self.srv.accept()
            with self.lock:
                self.nconn += 1
                cid = self.nconn
            threading.Thread(target=self.handle, args=(c, cid),
                             daemon=True).start()

    def handle(self, s, cid):
        s.settimeout(60)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ctx is not None:
            try:
                s = self.ctx.wrap_socket(s, server_side=True)
            except (ssl.SSLError, OSError):
                s.close()
                return
        conn = Conn(s)
        try:
            while True:
                try:
                    line, hdrs, body = self.read_request(conn)
                except EOFError:
                    break
                except Bad:
                    s.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length:"
                              b" 0\r\nConnection: close\r\n\r\n")
                    break
                parts = line.split(" ")
                method = parts[0]
                path = parts[1] if len(parts) > 1 else "/"
                seq = self.record(cid, method, path, hdrs, body)
                if not self.respond(s, seq, cid, path, hdrs, body):
                    break
        except (OSError, ssl.SSLError):
            pass
        try:
            s.close()
        except OSError:
            pass

    @staticmethod
    def read_request(conn):
        line = b""
        while line in (b"", b"\r\n", b"\n"):
            line = conn.readline()
        hdrs = []
        size = len(line)
        while True:
            ln = conn.readline()
            size += len(ln)
            if size > 1 << 20:
                raise Bad("head too long")
            if ln in (b"\r\n", b"\n"):
                break
            k, _, v = ln.decode("latin-1").partition(":")
            hdrs.append((k.strip(), v.strip()))
        te = [v for k, v in hdrs if k.lower() == "transfer-encoding"]
        cl = [v for k, v in hdrs if k.lower() == "content-length"]
        body = b""
        if te:
            parts = []
            while True:
                ln = conn.readline()
                try:
                    n = int(ln.split(b";")[0].strip(), 16)
                except ValueError:
                    raise Bad("chunk size")
                if n == 0:
                    while conn.readline() not in (b"\r\n", b"\n"):
                        pass
                    break
                parts.append(conn.read(n))
                if conn.read(2) != b"\r\n":
                    raise Bad("chunk end")
            body = b"".join(parts)
        elif cl:
            body = conn.read(int(cl[0]))
        return line.decode("latin-1").rstrip("\r\n"), hdrs, body

    def respond(self, s, seq, cid, path, hdrs, body):
        h = {k.lower(): v for k, v in hdrs}
        reqclose = "close" in h.get("connection", "").lower()
        try:
            req = json.loads(body.decode("utf-8")) if body else {}
        except ValueError:
            req = {}
        if not isinstance(req, dict):
            req = {}
        stream = req.get("stream") is True
        status = 200
        if "x-synth" in h:
            ctype, rbody = synth(h["x-synth"].strip().lower(), req, body,
                                 h.get("x-synth-usage"), path)
        else:
            name = h.get("x-fixture") or self.fx.default(
                path.split("?")[0], stream, path.partition("?")[2])
            data = self.fx.data(name) if name else None
            if data is None and path.split("?")[0].endswith("/models"):
                rbody = json.dumps({"object": "list", "data": [
                    {"id": "gpt-4o", "object": "model"}]}).encode()
                ctype = "application/json"
            elif data is None:
                rbody = json.dumps({"error": "no fixture %r for %s"
                                    % (name, path)}).encode()
                ctype = "application/json"
                status = 404
            else:
                e = self.fx.entry(name) or {}
                status = int(e.get("http_status") or 200)
                rbody = data
                if name.endswith(".sse"):
                    ctype = "text/event-stream; charset=utf-8"
                elif name.startswith("gemini/stream"):
                    ctype = "application/json; charset=UTF-8"
                else:
                    ctype = "application/json"
        if ctype.startswith("text/event-stream") and \
                h.get("x-newlines", "").lower() == "crlf":
            rbody = rbody.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        coding = choose_coding(h)
        rbody = encode_body(coding, rbody)
        framing = h.get("x-framing", "").lower() or (
            "chunked" if ctype.startswith("text/event-stream") else "length")
        cut = int(h["x-cut-after"]) if "x-cut-after" in h else None
        delay = float(h.get("x-delay-ms", self.args.delay_ms)) / 1000.0
        if delay > 0:
            time.sleep(delay)
        close = reqclose or framing == "close" or cut is not None
        out = b"HTTP/1.1 %d %s\r\n" % (status, STATUS_TEXT.get(
            status, "Status").encode())
        out += b"Server: llm-upstream\r\nX-Upstream-Seq: %d\r\n" % seq
        out += b"Content-Type: %s\r\n" % ctype.encode()
        if coding != "identity":
            out += b"Content-Encoding: %s\r\n" % coding.encode()
            out += b"Vary: Accept-Encoding\r\n"
        if ctype.startswith("text/event-stream"):
            out += b"Cache-Control: no-cache\r\n"
        if framing == "length":
            out += b"Content-Length: %d\r\n" % len(rbody)
        elif framing == "chunked":
            out += b"Transfer-Encoding: chunked\r\n"
        if close:
            out += b"Connection: close\r\n"
        out += b"\r\n"
        s.sendall(out)
        if cut is not None:
            rbody = rbody[:cut]
        if h.get("x-frag", "").lower() == "none":
            pieces = [rbody] if rbody else []
        else:
            pieces = fragments(rbody, seq)
        for i, p in enumerate(pieces):
            if framing == "chunked":
                s.sendall(b"%x\r\n%s\r\n" % (len(p), p))
            else:
                s.sendall(p)
            if i % 24 == 23:
                time.sleep(0.001)
        if cut is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return False
        if framing == "chunked":
            s.sendall(b"0\r\n\r\n")
        return not close


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", "--port", type=int, default=0)
    ap.add_argument("-P", "--port-file", required=True)
    ap.add_argument("-l", "--log", required=True)
    ap.add_argument("-C", "--cert")
    ap.add_argument("-K", "--key")
    ap.add_argument("-d", "--delay-ms", type=float, default=0)
    ap.add_argument("-f", "--fixtures")
    args = ap.parse_args()
    if bool(args.cert) != bool(args.key):
        ap.error("-C and -K go together")
    Server(args).serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
