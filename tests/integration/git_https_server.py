"""A loopback HTTPS git server for the integration scripts: git's smart
HTTP protocol served by `git http-backend` (CGI) under a threaded python
server with TLS. Every request is logged as one JSON line (method, path,
whether Proxy-Authorization or Authorization reached it).

  git_https_server.py -P PORTFILE -r PROJECT_ROOT -C CERT -K KEY -l LOG
"""

import argparse
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

BACKEND = "/usr/lib/git-core/git-http-backend"
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _log(self, status):
        rec = {"method": self.command, "path": self.path, "status": status,
               "host": self.headers.get("Host"),
               "proxy_auth": "Proxy-Authorization" in self.headers,
               "auth": "Authorization" in self.headers}
        with LOCK, open(self.server.log, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def _cgi(self):
        u = urlsplit(self.path)
        body = b""
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            body = self.rfile.read(n)
        elif self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "GIT_PROJECT_ROOT": self.server.root,
               "GIT_HTTP_EXPORT_ALL": "1",
               "REQUEST_METHOD": self.command,
               "PATH_INFO": u.path, "QUERY_STRING": u.query,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)),
               "REMOTE_ADDR": self.client_address[0]}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        p = subprocess.run([BACKEND], input=body, env=env,
                           capture_output=True, timeout=60)
        head, _, out = p.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, out = p.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        self._log(status)

    do_GET = _cgi
    do_POST = _cgi


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-P", required=True)
    ap.add_argument("-r", required=True)
    ap.add_argument("-C", required=True)
    ap.add_argument("-K", required=True)
    ap.add_argument("-l", required=True)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.root, srv.log = a.r, a.l
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.C, a.K)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(a.P + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(a.P + ".tmp", a.P)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
