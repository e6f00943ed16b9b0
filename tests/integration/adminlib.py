"""Admin API client for the integration scripts: HTTP/1.1 over the admin
unix socket (or HOST:PORT) with python's http.client, JSON bodies."""

import http.client
import json
import os
import socket


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("airlock-admin", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def connect(addr, timeout=10):
    """addr: "unix:PATH" or "HOST:PORT"."""
    if addr.startswith("unix:"):
        return UnixHTTPConnection(addr[5:], timeout)
    host, port = addr.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def call(addr, method, path, body=None, token=None, raw=None, headers=None,
         timeout=10):
    """Returns (status, headers dict (lower-case names), parsed body or
    text). <raw> sends bytes as the body as they are. <timeout>: seconds
    to wait for the answer (a cold qemu claim under TCG takes longer)."""
    c = connect(addr, timeout)
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = "Bearer " + token
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    if hdrs.get("content-type", "").startswith("application/json") and text:
        return r.status, hdrs, json.loads(text)
    return r.status, hdrs, text.decode("utf-8", "replace")


def token(state_dir):
    with open(os.path.join(state_dir, "admin.token")) as f:
        return f.read().strip()


def expect_error(res, status, code):
    st, hdrs, body = res
    assert st == status, "status %d, wanted %d: %r" % (st, status, body)
    assert isinstance(body, dict), "error body not JSON: %r" % (body,)
    assert body.get("error") == code, "error %r, wanted %r" % (body, code)
    assert body.get("reason"), "no reason: %r" % (body,)
    assert body.get("request_id") == hdrs.get("x-airlock-request-id"), \
        "request_id %r vs header %r" % (body, hdrs)
