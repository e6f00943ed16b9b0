"""HTTP/2 helpers for the 55x scripts (issue 19), with Debian's python3-h2
(run by the system python, /usr/bin/python3).

  H2Conn      CONNECT through the proxy, TLS with ALPN h2, an h2 client
              connection: requests on many streams, their events collected
  frame       raw frames (hyperframe) for what a correct client never sends
"""

import socket
import ssl
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
from hyperframe import frame as hf

import tlslib


class Stream:
    def __init__(self, sid):
        self.sid = sid
        self.status = None
        self.headers = []
        self.trailers = []
        self.body = b""
        self.ended = False
        self.reset = None       # error code of a RST_STREAM

    def header(self, name):
        for k, v in self.headers:
            if k == name.lower():
                return v
        return None

    def done(self):
        return self.ended or self.reset is not None

    def __repr__(self):
        return "<stream %d %s %s reset=%s %r>" % (
            self.sid, self.status, self.ended, self.reset, self.body[:200])


class H2Conn:
    """An h2 session with <target> ("host:port") through the proxy's
    CONNECT; validate=False lets invalid headers out (attack tests)."""

    def __init__(self, ap, target, cafile, host="api.test", alpn=("h2",),
                 validate=True, timeout=10.0):
        self.target = target
        self.authority = target
        ctx = tlslib.context(cafile, alpn=list(alpn))
        self.raw, _ = tlslib.proxy_connect(ap, target, timeout=timeout)
        self.client = tlslib.client_addr(self.raw)
        self.sock = ctx.wrap_socket(self.raw, server_hostname=host)
        self.alpn = self.sock.selected_alpn_protocol()
        cfg = h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8",
            validate_outbound_headers=validate,
            normalize_outbound_headers=validate,
            validate_inbound_headers=False)
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.h2.initiate_connection()
        self.streams = {}
        self.goaway = None      # (error code, last stream id)
        self.closed = False
        self.remote_settings = {}
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, path, headers=(), body=None, authority=None,
                end=True):
        sid = self.h2.get_next_available_stream_id()
        hs = [(":method", method), (":scheme", "https"),
              (":authority", authority or self.authority), (":path", path)]
        hs += list(headers)
        self.streams[sid] = Stream(sid)
        self.h2.send_headers(sid, hs, end_stream=(body is None and end))
        if body is not None:
            self.send_body(sid, body, end)
        self.flush()
        return sid

    def send_body(self, sid, body, end=True):
        while body:
            n = min(len(body), self.h2.local_flow_control_window(sid),
                    self.h2.max_outbound_frame_size)
            if n <= 0:
                self.flush()
                self.pump(0.5)
                continue
            self.h2.send_data(sid, body[:n])
            body = body[n:]
            self.flush()
        if end:
            self.h2.end_stream(sid)
        self.flush()

    def pump(self, timeout=5.0):
        """Read and handle what comes within <timeout>; False once closed."""
        if self.closed:
            return False
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            return True
        except (ConnectionError, ssl.SSLError, OSError):
            self.closed = True
            return False
        if not data:
            self.closed = True
            return False
        try:
            events = self.h2.receive_data(data)
        except Exception:
            self.closed = True
            return False
        for e in events:
            self.handle(e)
        try:
            self.flush()
        except OSError:
            self.closed = True
        return True

    def handle(self, e):
        s = self.streams.get(getattr(e, "stream_id", None))
        if isinstance(e, h2.events.ResponseReceived):
            s.headers = list(e.headers)
            s.status = int(dict(e.headers)[":status"])
        elif isinstance(e, h2.events.TrailersReceived):
            s.trailers = list(e.headers)
        elif isinstance(e, h2.events.InformationalResponseReceived):
            pass
        elif isinstance(e, h2.events.DataReceived):
            s.body += e.data
            self.h2.acknowledge_received_data(e.flow_controlled_length,
                                              e.stream_id)
        elif isinstance(e, h2.events.StreamEnded):
            s.ended = True
        elif isinstance(e, h2.events.StreamReset):
            if s is not None:
                s.reset = e.error_code
        elif isinstance(e, h2.events.ConnectionTerminated):
            self.goaway = (e.error_code, e.last_stream_id)
        elif isinstance(e, h2.events.RemoteSettingsChanged):
            for k, v in e.changed_settings.items():
                self.remote_settings[k] = v.new_value

    def wait(self, sids=None, timeout=10.0):
        """Until the streams <sids> (default all) are done or the
        connection ends; returns them."""
        end = time.time() + timeout
        sids = list(self.streams) if sids is None else list(sids)
        while time.time() < end and not all(self.streams[i].done()
                                            for i in sids):
            if not self.pump(0.5) and self.closed:
                break
        return [self.streams[i] for i in sids]

    def wait_closed(self, timeout=10.0):
        end = time.time() + timeout
        while time.time() < end and self.pump(0.5):
            pass
        return self.closed

    def send_raw(self, data):
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def frame(f):
    return f.serialize()


def headers_frame(conn, sid, headers, end_stream=True, end_headers=True):
    """A HEADERS frame with <headers> HPACK-encoded by <conn>'s encoder."""
    f = hf.HeadersFrame(sid)
    f.data = conn.h2.encoder.encode(headers)
    if end_stream:
        f.flags.add("END_STREAM")
    if end_headers:
        f.flags.add("END_HEADERS")
    return f.serialize()


class Raw:
    """Frames by hand (hyperframe, hpack) on an h2 session through the
    proxy: for what no correct client sends."""

    PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    def __init__(self, ap, target, cafile, host="api.test", timeout=10.0):
        import hpack
        ctx = tlslib.context(cafile, alpn=["h2"])
        self.raw, _ = tlslib.proxy_connect(ap, target, timeout=timeout)
        self.client = tlslib.client_addr(self.raw)
        self.sock = ctx.wrap_socket(self.raw, server_hostname=host)
        self.enc = hpack.Encoder()
        self.authority = target
        self.buf = b""
        self.frames = []
        self.closed = False
        self.sock.sendall(self.PREFACE + hf.SettingsFrame(0).serialize())

    def req_headers(self, method="GET", path="/json/4", extra=()):
        return [(":method", method), (":scheme", "https"),
                (":authority", self.authority), (":path", path)] + \
            list(extra)

    def headers(self, sid, hs, end_stream=True, end_headers=True):
        f = hf.HeadersFrame(sid)
        f.data = self.enc.encode(hs)
        if end_stream:
            f.flags.add("END_STREAM")
        if end_headers:
            f.flags.add("END_HEADERS")
        return f.serialize()

    def send(self, data, timeout=5.0):
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(data)
            return True
        except (OSError, ssl.SSLError):
            return False

    def read(self, timeout=5.0, until=None):
        """Frames read within <timeout> (or until <until>(frame) holds or
        the connection ends), acknowledging SETTINGS; all are kept."""
        end = time.time() + timeout
        while time.time() < end and not self.closed:
            self.sock.settimeout(max(0.05, end - time.time()))
            try:
                d = self.sock.recv(65536)
            except (socket.timeout, ssl.SSLWantReadError):
                continue
            except (OSError, ssl.SSLError):
                self.closed = True
                break
            if not d:
                self.closed = True
                break
            self.buf += d
            while len(self.buf) >= 9:
                f, n = hf.Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) < 9 + n:
                    break
                f.parse_body(memoryview(self.buf[9:9 + n]))
                self.buf = self.buf[9 + n:]
                self.frames.append(f)
                if isinstance(f, hf.SettingsFrame) and \
                        "ACK" not in f.flags:
                    a = hf.SettingsFrame(0)
                    a.flags.add("ACK")
                    self.send(a.serialize())
                if until is not None and until(f):
                    return self.frames
        return self.frames

    def goaway(self):
        for f in self.frames:
            if isinstance(f, hf.GoAwayFrame):
                return f.error_code
        return None

    def rst(self, sid):
        for f in self.frames:
            if isinstance(f, hf.RstStreamFrame) and f.stream_id == sid:
                return f.error_code
        return None

    def status(self, sid):
        """The :status of stream <sid>'s first HEADERS (every HEADERS is
        decoded in order: HPACK state is the connection's)."""
        import hpack
        if not hasattr(self, "dec"):
            self.dec, self.ndec, self.st = hpack.Decoder(), 0, {}
        for f in self.frames[self.ndec:]:
            self.ndec += 1
            if isinstance(f, hf.HeadersFrame):
                hs = dict(self.dec.decode(f.data))
                if ":status" in hs and f.stream_id not in self.st:
                    self.st[f.stream_id] = int(hs[":status"])
        return self.st.get(sid)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
