"""TLS helpers for the TLS interception scripts (tests/integration/1[3-7]0-
tls-*.sh), on top of itlib. Only the standard library and the openssl CLI.

  TLSConn        CONNECT through the proxy, then a TLS client (python ssl)
                 and HTTP/1.1 requests inside it
  s_client       openssl s_client -proxy through the proxy
  cert_info      subject, issuer, SAN, validity of a PEM certificate
  verify         openssl verify -CAfile
"""

import base64
import os
import re
import socket
import ssl
import subprocess
import tempfile
import time

import itlib


class ProxyRefused(Exception):
    """The proxy answered the CONNECT with something other than 2xx."""

    def __init__(self, resp):
        Exception.__init__(self, "CONNECT refused: %r" % (resp,))
        self.resp = resp


def proxy_connect(ap, target, auth=None, timeout=10.0):
    """CONNECT <target> ("host:port") through the proxy on 127.0.0.1:<ap>.
    Returns (sock, response); raises ProxyRefused (socket closed) when the
    answer is not 2xx, ValueError when bytes follow the 200's head."""
    if isinstance(target, str):
        target = target.encode()
    s = itlib.connect(ap, timeout)
    head = b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n" % (target, target)
    if auth:
        head += b"Proxy-Authorization: Basic " + \
            base64.b64encode(auth.encode()) + b"\r\n"
    s.sendall(head + b"\r\n")
    rd = itlib.Reader(s)
    try:
        r = itlib.read_response(rd, "CONNECT")
    except Exception:
        s.close()
        raise
    if not 200 <= r.status < 300:
        # the gateway's error has a body even for CONNECT
        cl = r.header("Content-Length")
        if cl is not None:
            try:
                r.body = rd.read(int(cl))
            except (itlib.Closed, OSError):
                pass
        s.close()
        raise ProxyRefused(r)
    if rd.buf:
        s.close()
        raise ValueError("bytes after the CONNECT response: %r" % rd.buf)
    return s, r


def client_addr(sock):
    """"IP:PORT" of our end of <sock>, as the audit's client field has it."""
    h, p = sock.getsockname()[:2]
    return "%s:%d" % (h, p)


def audit_client(path, client, pred=lambda r: True, timeout=10.0):
    """The first audit record of connection <client> matching <pred>."""
    return itlib.audit_wait(path, lambda r: r.get("client") == client and
                            pred(r), timeout)


def context(cafile=None, verify=True, alpn=None, min_version=None,
            max_version=None, check_hostname=True):
    """A client SSLContext. min_version/max_version: "1.2" or "1.3"."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    vers = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
    if min_version:
        ctx.minimum_version = vers[min_version]
    if max_version:
        ctx.maximum_version = vers[max_version]
    if verify:
        ctx.load_verify_locations(cafile)
        ctx.check_hostname = check_hostname
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


class TLSConn:
    """A TLS session with a host through the proxy's CONNECT.

    server_hostname None = no SNI (python sends none for IP literals
    either). Raises ProxyRefused or ssl.SSLError/OSError."""

    def __init__(self, ap, target, ctx, server_hostname=None, auth=None,
                 timeout=10.0, session=None):
        self.target = target
        self.sock, self.connect_response = proxy_connect(ap, target, auth,
                                                         timeout)
        # the audit's "client" field for this connection
        self.client = client_addr(self.sock)
        try:
            self.tls = ctx.wrap_socket(self.sock,
                                       server_hostname=server_hostname,
                                       session=session)
        except Exception as e:
            e.client = self.client
            self.sock.close()
            raise
        self.rd = itlib.Reader(self.tls)

    @classmethod
    def attempt(cls, *args, **kw):
        """(TLSConn or None, exception or None, client address): for
        handshakes expected to fail."""
        try:
            c = cls(*args, **kw)
            return c, None, c.client
        except ProxyRefused as e:
            return None, e, None
        except (ssl.SSLError, OSError) as e:
            return None, e, getattr(e, "client", None)

    def peer_pem(self):
        return ssl.DER_cert_to_PEM_cert(self.tls.getpeercert(True))

    def send(self, data):
        self.tls.sendall(data)

    def request(self, method, path, host=None, headers=(), body=b""):
        """One request, one response (itlib.Response); Host defaults to
        the CONNECT target."""
        if host is None:
            host = self.target
        out = b"%s %s HTTP/1.1\r\nHost: %s\r\n" % (
            method.encode(), path.encode(), host.encode())
        for h in headers:
            out += h.encode("latin-1") + b"\r\n"
        if body:
            out += b"Content-Length: %d\r\n" % len(body)
        self.tls.sendall(out + b"\r\n" + body)
        return itlib.read_response(self.rd, method)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def closed_after(self, wait=2.0):
        try:
            return self.rd.closed_after(wait)
        except (ssl.SSLError, OSError):
            return True

    def close(self):
        try:
            self.tls.close()
        except OSError:
            pass


def s_client(ap, target, servername=None, auth=None, args=(), stdin=b"",
             timeout=15, hold=0):
    """openssl s_client through the proxy. servername: a name for -servername,
    False for -noservername, None for s_client's default. auth "ID:TOKEN".
    <stdin> is written, and stdin closed <hold> seconds later (s_client
    ends at its EOF: hold keeps the session open for the server's answer
    and TLS 1.3 tickets). Returns (exit status, stdout, stderr) as text."""
    cmd = ["openssl", "s_client", "-proxy", "127.0.0.1:%d" % ap,
           "-connect", target]
    if auth:
        user, _, tok = auth.partition(":")
        cmd += ["-proxy_user", user, "-proxy_pass", "pass:" + tok]
    if servername is False:
        cmd.append("-noservername")
    elif servername:
        cmd += ["-servername", servername]
    cmd += list(args)
    if not hold:
        p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
        return (p.returncode, p.stdout.decode("utf-8", "replace"),
                p.stderr.decode("utf-8", "replace"))
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=fo, stderr=fe)
        try:
            p.stdin.write(stdin)
            p.stdin.flush()
            time.sleep(hold)
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        fo.seek(0)
        fe.seek(0)
        return (p.returncode, fo.read().decode("utf-8", "replace"),
                fe.read().decode("utf-8", "replace"))


PEM_RE = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----",
                    re.S)


def pem_certs(text):
    """Every PEM certificate in <text>, in order."""
    return [m + "\n" for m in PEM_RE.findall(text)]


def _x509(pem, *args):
    p = subprocess.run(["openssl", "x509", "-noout"] + list(args),
                       input=pem.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise ValueError("openssl x509 %s: %s" % (" ".join(args),
                                                  p.stderr.decode()))
    return p.stdout.decode()


def read(path):
    with open(path) as f:
        return f.read()


def cert_info(pem):
    """dict: subject, issuer (openssl's one-line form), san (list like
    ["DNS:api.test"]), not_before/not_after (epoch seconds), text."""
    out = _x509(pem, "-subject", "-issuer", "-dates")
    d = {}
    for line in out.splitlines():
        k, _, v = line.partition("=")
        d[k.strip()] = v.strip()
    info = {"subject": d.get("subject"), "issuer": d.get("issuer"),
            "not_before": ssl.cert_time_to_seconds(d["notBefore"]),
            "not_after": ssl.cert_time_to_seconds(d["notAfter"])}
    text = _x509(pem, "-text")
    info["text"] = text
    m = re.search(r"X509v3 Subject Alternative Name:.*?\n\s*(.*?)\n", text)
    info["san"] = [x.strip() for x in m.group(1).split(",")] if m else []
    return info


def verify(pem, cafile, strict=False):
    """(ok, output) of openssl verify -CAfile cafile."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        f.write(pem)
        name = f.name
    try:
        cmd = ["openssl", "verify"]
        if strict:
            cmd.append("-x509_strict")
        cmd += ["-CAfile", cafile, name]
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        out = p.stdout.decode()
        return p.returncode == 0 and out.strip().endswith(": OK"), out
    finally:
        os.unlink(name)


def origin_stats_direct(port, cafile, host="api.test"):
    """The TLS origin's /stats straight from the origin (not through the
    proxy): {"connections": C, "requests": R}; C counts this connection."""
    ctx = context(cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname=host) as ts:
            ts.sendall(b"GET /stats HTTP/1.1\r\nHost: %s:%d\r\n"
                       b"Connection: close\r\n\r\n" % (host.encode(), port))
            return itlib.read_response(itlib.Reader(ts)).json()
