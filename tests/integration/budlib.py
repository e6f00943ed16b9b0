"""Helpers for the budget integration scripts (tests/integration/2xx-budget-
*.sh), on top of itlib and tlslib: the test's own pricing arithmetic (exact
integers, never floats), the usage a fixture must be metered as, a leaf
certificate for the mock providers, clients through the proxy.

Money: prices are USD per million tokens, kept here as integer micro-dollars
per million tokens; a cost is
  ceil((uncached_input*input + cached*cached_input + cache_write*cache_write
        + output*output) / 10^6)  micro-dollars
where uncached_input = input_tokens - cached - cache_write (input_tokens
counts every prompt token). The worst case the gateway reserves for a
metered request is the same formula with input = the request body's length
in bytes and output = max_tokens | max_completion_tokens | max_output_tokens
| limits.default_max_tokens, at the model's prices (the highest of each kind
when no pattern matches).
"""

import decimal
import json
import os
import re
import subprocess
import time

import itlib
import tlslib


def usd_micro(s):
    """"0.15" -> 150000 (exact)."""
    d = decimal.Decimal(str(s)) * 1000000
    if d != d.to_integral_value():
        raise ValueError("more than 6 decimals: %s" % s)
    return int(d)


class Price:
    def __init__(self, model, input, output, cached_input=None,
                 cache_write=None):
        self.model = model
        self.text = {"input": input, "output": output,
                     "cached_input": cached_input,
                     "cache_write": cache_write}
        self.input = usd_micro(input)
        self.output = usd_micro(output)
        self.cached_input = usd_micro(cached_input) \
            if cached_input is not None else self.input
        self.cache_write = usd_micro(cache_write) \
            if cache_write is not None else self.input

    def yaml(self):
        parts = ['model: "%s"' % self.model]
        for k in ("input", "output", "cached_input", "cache_write"):
            if self.text[k] is not None:
                parts.append("%s: %s" % (k, self.text[k]))
        return "  - {%s}" % ", ".join(parts)


def pricing_yaml(table):
    return "pricing:\n" + "\n".join(p.yaml() for p in table) + "\n"


def glob_match(pat, s):
    """'*' matches any run of characters; everything else is literal."""
    rx = "".join(".*" if c == "*" else re.escape(c) for c in pat)
    return re.fullmatch(rx, s, re.S) is not None


def price_for(table, model):
    """(Price, unpriced): the first match, else the highest of each
    kind."""
    if model:
        for p in table:
            if glob_match(p.model, model):
                return p, False
    hi = Price("*", 0, 0)
    hi.input = max(p.input for p in table)
    hi.output = max(p.output for p in table)
    hi.cached_input = max(p.cached_input for p in table)
    hi.cache_write = max(p.cache_write for p in table)
    return hi, True


def ceil_div(a, b):
    return -(-a // b)


def cost(table, u):
    """(micro-dollars, unpriced) of an audit-shaped usage dict."""
    p, unpriced = price_for(table, u.get("model") or "")
    cached = u.get("cached_tokens", 0)
    write = u.get("cache_write_tokens", 0)
    uncached = u["input_tokens"] - cached - write
    assert uncached >= 0, u
    total = (uncached * p.input + cached * p.cached_input +
             write * p.cache_write + u["output_tokens"] * p.output)
    return ceil_div(total, 1000000), unpriced


def worst(table, model, input_est, max_out):
    """The reservation of a metered request."""
    p, _ = price_for(table, model)
    return ceil_div(input_est * p.input + max_out * p.output, 1000000)


def expected_usage(entry, data):
    """The audit "usage" a MANIFEST entry must be metered as (None when the
    fixture reports none). <data> is the fixture's bytes (for the model)."""
    from llm_upstream import fixture_model
    eu = entry.get("expected_usage")
    if not eu:
        return None
    model = fixture_model(data)
    if entry["provider"] == "gemini":
        # promptTokenCount includes the cached tokens; thoughts bill as
        # output, tool-use prompt tokens as input
        return {"model": model,
                "input_tokens": eu.get("promptTokenCount", 0) +
                eu.get("toolUsePromptTokenCount", 0),
                "cached_tokens": eu.get("cachedContentTokenCount", 0),
                "cache_write_tokens": 0,
                "output_tokens": eu.get("candidatesTokenCount", 0) +
                eu.get("thoughtsTokenCount", 0)}
    if entry["provider"] == "openai":
        if "prompt_tokens" in eu:
            inp = eu["prompt_tokens"]
            cached = (eu.get("prompt_tokens_details") or {}).get(
                "cached_tokens", 0)
            write = 0
            out = eu["completion_tokens"]
        else:
            inp = eu["input_tokens"]
            det = eu.get("input_tokens_details") or {}
            cached = det.get("cached_tokens", 0)
            write = det.get("cache_write_tokens", 0)
            out = eu["output_tokens"]
        return {"model": model, "input_tokens": inp, "cached_tokens": cached,
                "cache_write_tokens": write, "output_tokens": out}
    # anthropic: a stream's message_delta usage is cumulative and wins;
    # message_start fills in what it lacks
    if "message_start.usage" in eu or "final message_delta.usage" in eu:
        u = dict(eu.get("message_start.usage") or {})
        u.update(eu.get("final message_delta.usage") or {})
    else:
        u = eu
    base = u.get("input_tokens", 0)
    write = u.get("cache_creation_input_tokens", 0) or 0
    cached = u.get("cache_read_input_tokens", 0) or 0
    return {"model": model, "input_tokens": base + write + cached,
            "cached_tokens": cached, "cache_write_tokens": write,
            "output_tokens": u.get("output_tokens", 0)}


def mkleaf(pki, names, out):
    """A leaf for DNS <names> signed by <pki>/ca.key: <out>.crt, <out>.key.
    """
    san = ", ".join("DNS:" + n for n in names)
    cnf = out + ".cnf"
    with open(cnf, "w") as f:
        f.write("[req]\ndistinguished_name=dn\nprompt=no\n[dn]\nCN=%s\n"
                "[ext]\nbasicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=%s\n"
                % (names[0], san))

    def run(*cmd):
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if p.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(cmd), p.stdout))
    run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-out", out + ".key")
    run("openssl", "req", "-new", "-config", cnf, "-key", out + ".key",
        "-out", out + ".csr")
    run("openssl", "x509", "-req", "-in", out + ".csr", "-CA",
        pki + "/ca.crt", "-CAkey", pki + "/ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", cnf, "-extensions", "ext",
        "-out", out + ".crt")


def jbody(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


class Client:
    """Requests of one sandbox through the proxy, to one host: intercepted
    HTTPS (CONNECT + the sandbox's CA) when <ca> is given, else plain HTTP
    in absolute form. Keeps its connection; reconnects when it is gone."""

    def __init__(self, ap, host, port, auth, ca=None, timeout=20.0):
        self.ap, self.host, self.port = ap, host, port
        self.auth, self.ca, self.timeout = auth, ca, timeout
        self.conn = None

    def _tls(self):
        if self.conn is None:
            ctx = tlslib.context(self.ca)
            self.conn = tlslib.TLSConn(self.ap, "%s:%d" % (self.host,
                                                          self.port),
                                       ctx, self.host, self.auth,
                                       self.timeout)
        return self.conn

    def _plain(self):
        if self.conn is None:
            s = itlib.connect(self.ap, self.timeout)
            self.conn = (s, itlib.Reader(s))
        return self.conn

    def close(self):
        if self.conn is None:
            return
        try:
            if self.ca:
                self.conn.close()
            else:
                self.conn[0].close()
        except OSError:
            pass
        self.conn = None

    def request(self, method, path, body=b"", headers=(), retry=True):
        """itlib.Response, or None when the connection ended without one
        (after one retry on a fresh connection when a kept-alive one was
        found closed)."""
        hdrs = list(headers)
        reused = self.conn is not None
        try:
            if self.ca:
                c = self._tls()
                out = b"%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (
                    method.encode(), path.encode(), self.host.encode(),
                    self.port)
                for h in hdrs:
                    out += h.encode("latin-1") + b"\r\n"
                out += b"Content-Length: %d\r\n\r\n" % len(body)
                c.send(out + body)
                r = itlib.read_response(c.rd, method)
            else:
                s, rd = self._plain()
                url = "http://%s:%d%s" % (self.host, self.port, path)
                hdrs.append("Content-Length: %d" % len(body))
                s.sendall(itlib.req(method, url, hdrs, body,
                                    auth=self.auth))
                r = itlib.read_response(rd, method)
        except (itlib.Closed, ConnectionResetError, BrokenPipeError,
                OSError) as e:
            self.close()
            if retry and reused and not isinstance(e, TimeoutError):
                return self.request(method, path, body, headers, False)
            return None
        conn_hdr = (r.header("Connection") or "").lower()
        if "close" in conn_hdr:
            self.close()
        return r


    def request_raw(self, method, path, body=b"", headers=(), wait=10.0):
        """Send one request on a fresh connection and read until the proxy
        closes it (or <wait> seconds): every byte that came back."""
        self.close()
        hdrs = list(headers) + ["Content-Length: %d" % len(body),
                                "Connection: close"]
        if self.ca:
            c = self._tls()
            out = b"%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (
                method.encode(), path.encode(), self.host.encode(),
                self.port)
            for h in hdrs:
                out += h.encode("latin-1") + b"\r\n"
            c.send(out + b"\r\n" + body)
            sock = c.tls
        else:
            sock, _ = self._plain()
            url = "http://%s:%d%s" % (self.host, self.port, path)
            sock.sendall(itlib.req(method, url, hdrs, body, auth=self.auth))
        sock.settimeout(wait)
        data = b""
        try:
            while True:
                d = sock.recv(65536)
                if not d:
                    break
                data += d
        except OSError:
            pass
        self.close()
        return data


def head_header(data, name):
    """A header's value from the head of raw response bytes."""
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    for ln in head.split("\r\n")[1:]:
        k, _, v = ln.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def audit_for(path, rid, timeout=10.0):
    return itlib.audit_wait(path, lambda a: a.get("id") == rid, timeout)


def audit_raw_line(path, rid):
    """The raw text of the audit line with this id (for number formats)."""
    try:
        with open(path) as f:
            for line in f:
                if '"%s"' % rid in line:
                    try:
                        if json.loads(line).get("id") == rid:
                            return line
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    return None


def upstream_records(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    return out


def upstream_wait(path, pred, timeout=10.0):
    end = time.time() + timeout
    while True:
        for r in upstream_records(path):
            if pred(r):
                return r
        if time.time() > end:
            return None
        time.sleep(0.05)


def check_cost_fields(t, audit, rec, want_micro, what):
    """cost_microusd is the integer <want_micro>, cost_usd the same amount
    as a JSON number (compared exactly, as a decimal)."""
    got = rec.get("cost_microusd") if rec else None
    ok = t.ok(isinstance(got, int) and not isinstance(got, bool) and
              got == want_micro, "%s: cost_microusd == %s" % (what,
                                                             want_micro),
              "got %r" % (got,))
    raw = audit_raw_line(audit, rec["id"]) if rec else None
    usd = None
    if raw:
        usd = json.loads(raw, parse_float=decimal.Decimal).get("cost_usd")
    t.ok(isinstance(usd, (decimal.Decimal, int)) and
         decimal.Decimal(usd) * 1000000 == want_micro,
         "%s: cost_usd == cost_microusd / 10^6 exactly" % what,
         "cost_usd %r" % (usd,))
    return ok

