#!/usr/bin/env python3
r"""token_upstream.py: mock token endpoints for the token broker script
(tests/integration/570-secrets-brokers.sh). Needs python3-cryptography.

  token_upstream.py -P PORTFILE -C CERT -K KEY -s STATE_DIR \
      --google-pub PEM --github-pub PEM --app-id N --installation N \
      --client-id ID --client-secret S --refresh-token RT

HTTPS on 127.0.0.1. Every request is checked like the real service would:
  POST /cc/token        client_credentials: client_id, client_secret
  POST /rt/token        refresh_token (rotated on every answer: the
                        previous one stops working), client_id
  POST /google/token    jwt-bearer: RS256 signature (--google-pub), iss,
                        aud (this URL), scope, iat/exp (<= 1 h)
  POST /app/installations/N/access_tokens   Bearer app JWT: RS256
                        (--github-pub), iss = app id, exp - iat <= 10 min
Answers carry a fresh token "tok-NAME-<R>-<n>"; STATE_DIR/NAME.json is
{"calls", "ok", "bad": [why...], "tokens": [...], "jwts": [...]} after
each call. STATE_DIR/NAME.ctl (re-read per call, optional) is JSON:
{"down": true} answers 503 temporarily_unavailable, {"delay": S} sleeps
first, {"expires_in": S} the lifetime (default 3600).
"""

import argparse
import base64
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

A = None
LOCK = threading.Lock()
RT = {}         # the refresh token currently valid


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def jwt_check(tok, pubpem):
    """(claims, problem or None): RS256 signature and header."""
    try:
        h, c, s = tok.split(".")
        hdr = json.loads(b64d(h))
        claims = json.loads(b64d(c))
        if hdr.get("alg") != "RS256":
            return claims, "alg %r" % hdr.get("alg")
        key = serialization.load_pem_public_key(open(pubpem, "rb").read())
        key.verify(b64d(s), (h + "." + c).encode(), padding.PKCS1v15(),
                   hashes.SHA256())
        return claims, None
    except Exception as e:      # any malformed JWT is a failed check
        return {}, "bad JWT: %r" % (e,)


def state(name):
    p = os.path.join(A.s, name + ".json")
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return {"calls": 0, "ok": 0, "bad": [], "tokens": [], "jwts": []}


def save(name, st):
    p = os.path.join(A.s, name + ".json")
    with open(p + ".tmp", "w") as f:
        json.dump(st, f)
    os.rename(p + ".tmp", p)


def ctl(name):
    try:
        return json.load(open(os.path.join(A.s, name + ".ctl")))
    except (OSError, ValueError):
        return {}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, obj):
        b = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n).decode()
        form = dict(urllib.parse.parse_qsl(body, keep_blank_values=True))
        path = self.path
        if path == "/cc/token":
            name = "cc"
        elif path == "/rt/token":
            name = "rt"
        elif path == "/google/token":
            name = "google"
        elif path == "/app/installations/%s/access_tokens" % A.installation:
            name = "github"
        else:
            return self.answer(404, {"error": "not_found"})
        c = ctl(name)
        if c.get("delay"):
            time.sleep(c["delay"])
        with LOCK:
            st = state(name)
            st["calls"] += 1
            why = None if not c.get("down") else "down"
            jwt = None
            if why is None:
                why, jwt = self.check(name, form)
            if jwt:
                st["jwts"].append(jwt)
            if why is not None:
                if why != "down":
                    st["bad"].append(why)
                save(name, st)
                if why == "down":
                    return self.answer(503, {
                        "error": "temporarily_unavailable"})
                return self.answer(400, {"error": "invalid_grant"})
            st["ok"] += 1
            tok = "tok-%s-%s-%d" % (name, A.r, st["ok"])
            st["tokens"].append(tok)
            st.setdefault("times", []).append(time.time())
            out = {"token_type": "Bearer",
                   "expires_in": c.get("expires_in", 3600)}
            if name == "github":
                out = {"token": tok, "expires_at": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(
                        time.time() + c.get("expires_in", 3600)))}
            else:
                out["access_token"] = tok
            if name == "rt":
                RT["v"] = "rt-%s-%d" % (A.r, st["ok"] + 1)
                out["refresh_token"] = RT["v"]
                st["tokens"].append(RT["v"])
            save(name, st)
        self.answer(201 if name == "github" else 200, out)

    def check(self, name, form):
        """(problem or None, the JWT checked or None)."""
        ct = self.headers.get("Content-Type", "")
        if name == "cc":
            if ct != "application/x-www-form-urlencoded":
                return "content-type %r" % ct, None
            if form.get("grant_type") != "client_credentials":
                return "grant_type %r" % form.get("grant_type"), None
            if (form.get("client_id") != A.client_id or
                    form.get("client_secret") != A.client_secret):
                return "bad client credentials", None
            if form.get("scope") != "read write":
                return "scope %r" % form.get("scope"), None
            return None, None
        if name == "rt":
            want = RT.get("v", A.refresh_token)
            if form.get("grant_type") != "refresh_token":
                return "grant_type %r" % form.get("grant_type"), None
            if form.get("refresh_token") != want:
                return "refresh_token is not the current one", None
            if form.get("client_id") != A.client_id:
                return "client_id", None
            return None, None
        if name == "google":
            if form.get("grant_type") != \
                    "urn:ietf:params:oauth:grant-type:jwt-bearer":
                return "grant_type %r" % form.get("grant_type"), None
            jwt = form.get("assertion", "")
            cl, why = jwt_check(jwt, A.google_pub)
            if why:
                return why, jwt
            now = time.time()
            aud = "https://tokens.test:%d/google/token" % A.port
            if cl.get("iss") != "sa@proj.iam.gserviceaccount.com":
                return "iss %r" % cl.get("iss"), jwt
            if cl.get("aud") != aud:
                return "aud %r" % cl.get("aud"), jwt
            if cl.get("scope") != ("https://www.googleapis.com/auth/"
                                   "cloud-platform https://www.googleapis."
                                   "com/auth/devstorage.read_only"):
                return "scope %r" % cl.get("scope"), jwt
            if not (cl["iat"] - 60 <= now <= cl["exp"] and
                    cl["exp"] - cl["iat"] <= 3600):
                return "iat/exp %r" % cl, jwt
            return None, jwt
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return "no bearer JWT", None
        jwt = auth[7:]
        cl, why = jwt_check(jwt, A.github_pub)
        if why:
            return why, jwt
        now = time.time()
        if str(cl.get("iss")) != A.app_id:
            return "iss %r" % cl.get("iss"), jwt
        if not (cl["iat"] <= now <= cl["exp"] and
                cl["exp"] - cl["iat"] <= 600):
            return "iat/exp %r" % cl, jwt
        if self.headers.get("Accept") != "application/vnd.github+json":
            return "accept", jwt
        return None, jwt


def main():
    global A
    p = argparse.ArgumentParser()
    for o in ("-P", "-C", "-K", "-s", "--google-pub", "--github-pub",
              "--app-id", "--installation", "--client-id",
              "--client-secret", "--refresh-token", "--r"):
        p.add_argument(o, required=True)
    A = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    A.port = srv.server_address[1]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(A.C, A.K)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(A.P + ".tmp", "w") as f:
        f.write("%d\n" % A.port)
    os.rename(A.P + ".tmp", A.P)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
