#!/usr/bin/env python3
"""compat_git_server.py: git's smart HTTP over HTTPS for
452-compat-git.sh: `git http-backend` (CGI) behind a small threaded
HTTPS server on loopback. Standard library only.

  compat_git_server.py -P PORTFILE -l LOG -C CERT -K KEY -r ROOT
                       [-b GIT_HTTP_BACKEND]

Serves the repositories under ROOT (GIT_PROJECT_ROOT, every one exported;
pushing needs `http.receivepack true` in the repository). HTTP/1.1 with
keep-alive; request bodies by Content-Length or chunked (git chunks large
pushes). Every request is appended to LOG as one JSON line before it is
answered: {"method", "target", "version", "headers": [[name, value]...],
"body_bytes", "status"}.
"""

import argparse
import json
import os
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # noqa: D401 - quiet
        pass

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def run_backend(self, body):
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        p = subprocess.run([self.server.backend], input=body, env=env,
                           capture_output=True, timeout=60)
        head, _, out = p.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = p.stdout.partition(b"\n\n")
        status, hdrs = 200, []
        for ln in head.decode("latin-1").splitlines():
            k, _, v = ln.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                hdrs.append((k, v.strip()))
        if p.returncode != 0 and not p.stdout:
            status, hdrs, out = 500, [], p.stderr
        return status, hdrs, out

    def handle_any(self):
        body = self.read_body()
        status, hdrs, out = self.run_backend(body)
        self.server.log({"method": self.command, "target": self.path,
                         "version": self.request_version,
                         "headers": [[k, v] for k, v in
                                     self.headers.items()],
                         "body_bytes": len(body), "status": status})
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = handle_any


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-P", required=True)
    ap.add_argument("-l", required=True)
    ap.add_argument("-C", required=True)
    ap.add_argument("-K", required=True)
    ap.add_argument("-r", required=True)
    ap.add_argument("-b", default="/usr/lib/git-core/git-http-backend")
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.C, a.K)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.root, srv.backend = a.r, a.b
    lock = threading.Lock()
    logf = open(a.l, "a", encoding="utf-8")

    def log(rec):
        with lock:
            logf.write(json.dumps(rec) + "\n")
            logf.flush()
    srv.log = log
    with open(a.P + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(a.P + ".tmp", a.P)
    srv.serve_forever()


if __name__ == "__main__":
    main()
