#!/usr/bin/env python3
"""compat_registry.py: an npm registry mock for 454-compat-npm.sh.
Standard library only.

  compat_registry.py -P PORTFILE -l LOG -C CERT -K KEY -u BASE_URL

HTTPS on 127.0.0.1 (ephemeral port, written to PORTFILE). BASE_URL is the
registry's address as clients name it, for the tarball URLs; "PORT" in it
is replaced by the port the server got (https://registry.test:PORT/). Packages,
each at version 1.0.0, with a packument and a gzipped tarball made at
start (integrity sha512 and shasum as npm checks them):

  compat-plain         no dependencies
  compat-top           depends on @scope/name ^1.0.0
  @scope/name          a scoped package: its packument is asked for as
                       /@scope%2fname (npm's spelling), also served as
                       /@scope%2Fname and /@scope/name

Every request is appended to LOG as one JSON line before the answer:
{"method", "target", "headers": [[name, value]...], "status"}.
"""

import argparse
import base64
import gzip
import hashlib
import io
import json
import os
import ssl
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PACKAGES = {
    "compat-plain": {},
    "compat-top": {"@scope/name": "^1.0.0"},
    "@scope/name": {},
}


def tarball(name, deps):
    short = name.split("/")[-1]
    files = {
        "package/package.json": json.dumps({
            "name": name, "version": "1.0.0", "main": "index.js",
            "dependencies": deps}).encode(),
        "package/index.js": (
            "module.exports = %s;\n" % json.dumps("I am " + name) if not deps
            else "module.exports = %s + ' + ' + require(%s);\n" % (
                json.dumps("I am " + name), json.dumps(list(deps)[0]))
        ).encode(),
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        for path, data in files.items():
            ti = tarfile.TarInfo(path)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1700000000
            tf.addfile(ti, io.BytesIO(data))
    tgz = gzip.compress(raw.getvalue(), mtime=0)
    return "%s/-/%s-1.0.0.tgz" % (name, short), tgz


def build(base):
    routes = {}
    for name, deps in PACKAGES.items():
        tpath, tgz = tarball(name, deps)
        integrity = "sha512-" + base64.b64encode(
            hashlib.sha512(tgz).digest()).decode()
        doc = {"name": name, "dist-tags": {"latest": "1.0.0"},
               "versions": {"1.0.0": {
                   "name": name, "version": "1.0.0", "dependencies": deps,
                   "dist": {"tarball": base + tpath, "integrity": integrity,
                            "shasum": hashlib.sha1(tgz).hexdigest()}}}}
        body = json.dumps(doc).encode()
        if name.startswith("@"):
            scope, short = name.split("/")
            for spelling in ("%2f", "%2F", "/"):
                routes["/" + scope + spelling + short] = (
                    "application/json", body)
        else:
            routes["/" + name] = ("application/json", body)
        routes["/" + tpath] = ("application/octet-stream", tgz)
    return routes


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        ctype, body = self.server.routes.get(path, ("application/json",
                                                    None))
        status = 200 if body is not None else 404
        if body is None:
            body = b'{"error":"Not found"}'
        self.server.log({"method": self.command, "target": self.path,
                         "headers": [[k, v] for k, v in self.headers.items()],
                         "status": status})
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser()
    for o in ("-P", "-l", "-C", "-K", "-u"):
        ap.add_argument(o, required=True)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.C, a.K)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    port = srv.server_address[1]
    srv.routes = build(a.u.replace("PORT", str(port)))
    lock = threading.Lock()
    logf = open(a.l, "a", encoding="utf-8")

    def log(rec):
        with lock:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()
    srv.log = log
    with open(a.P + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(a.P + ".tmp", a.P)
    srv.serve_forever()


if __name__ == "__main__":
    main()
