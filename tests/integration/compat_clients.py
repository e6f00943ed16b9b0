"""compat_clients.py CASE: one case of 451-compat-python.sh, run by the
system python (/usr/bin/python3, which has Debian's python3-websocket,
-requests, -httpx and -aiohttp). Prints TAP-like ok / not ok lines and
exits 1 when a check failed.

Environment: AIRLOCK_PORT, T, HTTP_PORT and HTTPS_PORT (compat_upstream.py
plain and TLS, event logs $T/up.jsonl and $T/ups.jsonl), the sandbox n
(token tok-n) whose CA is $T/state/ca/n/ca.crt.

Every case checks what the client got, what the upstream saw (the request
as it arrived: origin-form target, Host, no Proxy-Authorization, the body)
and the audit record of the request.
"""

import json
import os
import sys
import time

import itlib

AP = itlib.env_int("AIRLOCK_PORT")
T = os.environ["T"]
HP, SP = itlib.env_int("HTTP_PORT"), itlib.env_int("HTTPS_PORT")
CA = T + "/state/ca/n/ca.crt"
AUDIT = T + "/audit.jsonl"
PROXY = "http://n:tok-n@127.0.0.1:%d" % AP
t = itlib.Checks()


def url(scheme, host, path):
    return "%s://%s:%d%s" % (scheme, host,
                            SP if scheme in ("https", "wss") else HP, path)


def up_events(scheme):
    path = T + ("/ups.jsonl" if scheme in ("https", "wss") else "/up.jsonl")
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def wait_up(scheme, target, until=("request",), secs=5.0):
    """The upstream's request for target and the events of its
    connection, once one of the events named by until has been logged."""
    end = time.time() + secs
    while True:
        ev = up_events(scheme)
        reqs = [e for e in ev if e["ev"] == "request" and
                e["target"] == target]
        mine = [e for e in ev if reqs and e.get("conn") == reqs[0]["conn"]]
        if any(e["ev"] in until for e in mine) or time.time() > end:
            return reqs, mine
        time.sleep(0.1)


def check_upstream(what, scheme, host, target, method="GET", body=None):
    reqs, _ = wait_up(scheme, target)
    if not t.ok(len(reqs) == 1, what + ": the upstream got one %s %s" %
                (method, target),
                [e.get("target") for e in up_events(scheme)][-8:]):
        return
    r = reqs[0]
    head = r["head"].lower()
    port = SP if scheme in ("https", "wss") else HP
    t.ok(r["method"] == method, what + ": upstream method " + method,
         r["method"])
    t.ok("\r\nhost: %s:%d\r\n" % (host, port) in head,
         what + ": upstream Host %s:%d" % (host, port), head)
    t.ok("proxy-authorization" not in head,
         what + ": no Proxy-Authorization upstream", head)
    if scheme in ("https", "wss"):
        t.ok(r["tls"] and r["sni"] == host,
             what + ": upstream TLS with SNI " + host, (r["tls"], r["sni"]))
    if body is not None:
        t.ok(r["body"] == body, what + ": upstream got the body", r["body"])


def check_audit(what, path, status, proto, method="GET", rule="p#0"):
    rec = itlib.audit_wait(AUDIT, lambda a: a.get("path") == path and
                           a.get("method") == method, 10)
    if not t.ok(rec is not None, what + ": audited", path):
        return
    want = {"status": status, "decision": "allow", "sandbox": "n",
            "proto": proto, "rule": rule, "mode": "explicit"}
    if proto == "https":
        want["tls"] = "intercept"
    bad = {k: rec.get(k) for k, v in want.items() if rec.get(k) != v}
    t.ok(not bad, what + ": audit %s" % want, bad)


def check_denied_audit(what, host):
    rec = itlib.audit_wait(AUDIT, lambda a: a.get("host") == host and
                           a.get("decision") == "deny", 10)
    t.ok(rec is not None and rec.get("status") == 403 and
         rec.get("sandbox") == "n", what + ": the denial is audited", rec)


def body_json(what, text):
    try:
        return json.loads(text)
    except ValueError:
        t.ok(False, what + ": JSON body", text[:300])
        return {}


# --- python websocket-client ------------------------------------------
def websocket_client(scheme, by):
    import websocket
    tag = "wsc-%s-%s" % (scheme, by)
    what = "websocket-client %s:// (http_proxy_host), closed by the %s" % (
        scheme, by)
    target = "/ws/" + tag
    try:
        ws = websocket.create_connection(
            url(scheme, "ws.test", target), timeout=10,
            http_proxy_host="127.0.0.1", http_proxy_port=AP,
            http_proxy_auth=("n", "tok-n"), proxy_type="http",
            sslopt={"ca_certs": CA})
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        t.ok(False, what + ": the handshake completes", repr(e))
        return
    t.ok(ws.getstatus() == 101, what + ": 101", ws.getstatus())
    ws.send("hello " + tag)
    t.ok(ws.recv() == "hello " + tag, what + ": the echo arrives")
    if by == "client":
        ws.send_close(1000, b"done")
        want_reason = b"done"
    else:
        ws.send("server-close")
        want_reason = b"bye"
    try:
        op, fr = ws.recv_data_frame(True)   # replies to a server's close
        got = (op, fr.data[:2], fr.data[2:])
    except Exception as e:  # noqa: BLE001
        got = repr(e)
    t.ok(got == (websocket.ABNF.OPCODE_CLOSE, b"\x03\xe8", want_reason),
         what + ": the client gets the close 1000 %r" % want_reason, got)
    ws.shutdown()
    _, mine = wait_up(scheme, target, ("ws_close", "ws_eof"))
    check_upstream(what, scheme, "ws.test", target)
    t.ok(any(e["ev"] == "ws_msg" and e["data"] == "hello " + tag and
             e["masked"] for e in mine),
         what + ": the upstream got the masked message", mine)
    want_by = "client" if by == "client" else "reply"
    t.ok(any(e["ev"] == "ws_close" and e["code"] == 1000 and
             e["by"] == want_by for e in mine),
         what + ": the upstream got the client's close (%s)" % want_by, mine)
    check_audit(what, target, 101, "https" if scheme == "wss" else "http",
                rule="p#1")


# --- requests ----------------------------------------------------------
def requests_case(scheme):
    import requests
    what = "requests %s://" % scheme
    pre = "/rq/" + scheme
    px = {"http": PROXY, "https": PROXY}
    s = requests.Session()
    r = s.get(url(scheme, "api.test", pre + "/get?x=1"), proxies=px, verify=CA,
              timeout=10)
    j = body_json(what, r.text)
    t.ok(r.status_code == 200 and j.get("target") == pre + "/get?x=1",
         what + " GET: 200 and the upstream's answer", (r.status_code, j))
    rid = r.headers.get("X-Airlock-Request-Id")
    t.ok(rid, what + " GET: X-Airlock-Request-Id", dict(r.headers))
    check_upstream(what + " GET", scheme, "api.test", pre + "/get?x=1")
    check_audit(what + " GET", pre + "/get", 200, scheme)
    payload = {"k": "v", "n": [1, 2, 3]}
    r = s.post(url(scheme, "api.test", pre + "/post"), json=payload,
               proxies=px, verify=CA, timeout=10)
    t.ok(r.status_code == 200 and body_json(what, r.text).get("method") ==
         "POST", what + " POST: 200", (r.status_code, r.text[:200]))
    check_upstream(what + " POST", scheme, "api.test", pre + "/post", "POST",
                   json.dumps(payload))
    check_audit(what + " POST", pre + "/post", 200, scheme, "POST")


def requests_scoped():
    """Issue 15 point 2: a scoped name, %2F in the path (urllib3 writes
    percent-encodings in upper case, so this is what requests sends)."""
    import requests
    what = "requests https:// with %2F (scoped package path)"
    r = requests.get(url("https", "api.test", "/@scope%2Fname"),
                     proxies={"https": PROXY}, verify=CA, timeout=10)
    t.ok(r.status_code == 200, what + ": 200", (r.status_code, r.text[:300]))
    check_upstream(what, "https", "api.test", "/@scope%2Fname")


def requests_denied(scheme):
    """Issue 15 point 4 (https): the denial reaches the agent as the
    gateway's JSON 403, inside TLS for https."""
    import requests
    what = "requests %s:// to a denied host" % scheme
    host = "denied%s.test" % scheme
    try:
        r = requests.get(url(scheme, host, "/x"),
                         proxies={"http": PROXY, "https": PROXY}, verify=CA,
                         timeout=10)
        got = (r.status_code, r.text)
    except Exception as e:  # noqa: BLE001
        got = (None, repr(e))
    ok = got[0] == 403
    j = body_json(what, got[1]) if ok else {}
    t.ok(ok and j.get("error") == "denied" and j.get("reason") and
         j.get("request_id"), what + ": 403 with the JSON reason", got)
    check_denied_audit(what, host)


# --- httpx -------------------------------------------------------------
def httpx_case(scheme):
    import httpx
    what = "httpx %s://" % scheme
    pre = "/hx/" + scheme
    with httpx.Client(proxies=PROXY, verify=CA, timeout=10) as c:
        r = c.get(url(scheme, "api.test", pre + "/get"))
        t.ok(r.status_code == 200 and
             body_json(what, r.text).get("target") == pre + "/get",
             what + " GET: 200 and the upstream's answer",
             (r.status_code, r.text[:200]))
        check_upstream(what + " GET", scheme, "api.test", pre + "/get")
        check_audit(what + " GET", pre + "/get", 200, scheme)
        r = c.post(url(scheme, "api.test", pre + "/post"), content=b"abc=1")
        t.ok(r.status_code == 200, what + " POST: 200",
             (r.status_code, r.text[:200]))
        check_upstream(what + " POST", scheme, "api.test", pre + "/post",
                       "POST", "abc=1")
        check_audit(what + " POST", pre + "/post", 200, scheme, "POST")


# --- aiohttp -----------------------------------------------------------
def aiohttp_case(scheme):
    import asyncio
    import ssl
    import aiohttp
    what = "aiohttp %s://" % scheme
    pre = "/ah/" + scheme
    ctx = ssl.create_default_context(cafile=CA)

    async def run():
        auth = aiohttp.BasicAuth("n", "tok-n")
        px = "http://127.0.0.1:%d" % AP
        tmo = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=tmo) as s:
            async with s.get(url(scheme, "api.test", pre + "/get"), proxy=px,
                             proxy_auth=auth, ssl=ctx) as r:
                got_get = (r.status, await r.text())
            async with s.post(url(scheme, "api.test", pre + "/post"), proxy=px,
                              proxy_auth=auth, ssl=ctx,
                              data=b"x" * 1000) as r:
                got_post = (r.status, await r.text())
        return got_get, got_post
    try:
        got_get, got_post = asyncio.run(run())
    except Exception as e:  # noqa: BLE001
        t.ok(False, what + ": requests complete", repr(e))
        return
    t.ok(got_get[0] == 200 and
         body_json(what, got_get[1]).get("target") == pre + "/get",
         what + " GET: 200 and the upstream's answer", got_get)
    check_upstream(what + " GET", scheme, "api.test", pre + "/get")
    check_audit(what + " GET", pre + "/get", 200, scheme)
    t.ok(got_post[0] == 200, what + " POST: 200", got_post)
    check_upstream(what + " POST", scheme, "api.test", pre + "/post", "POST",
                   "x" * 1000)
    check_audit(what + " POST", pre + "/post", 200, scheme, "POST")


CASES = {
    "websocket-client-ws-client": lambda: websocket_client("ws", "client"),
    "websocket-client-ws-server": lambda: websocket_client("ws", "server"),
    "websocket-client-wss-client": lambda: websocket_client("wss", "client"),
    "websocket-client-wss-server": lambda: websocket_client("wss", "server"),
    "requests-http": lambda: requests_case("http"),
    "requests-https": lambda: requests_case("https"),
    "requests-scoped": requests_scoped,
    "requests-denied-http": lambda: requests_denied("http"),
    "requests-denied-https": lambda: requests_denied("https"),
    "httpx-http": lambda: httpx_case("http"),
    "httpx-https": lambda: httpx_case("https"),
    "aiohttp-http": lambda: aiohttp_case("http"),
    "aiohttp-https": lambda: aiohttp_case("https"),
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.stderr.write("usage: compat_clients.py CASE (%s)\n"
                         % " ".join(CASES))
        sys.exit(2)
    CASES[sys.argv[1]]()
    t.done()
