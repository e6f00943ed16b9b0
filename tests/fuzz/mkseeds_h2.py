#!/usr/bin/python3
"""Seeds for fuzz_h2_frames (run from tests/fuzz/ with the system python,
which has python3-h2): what real clients send after the connection
preface (the target prepends it), valid and hostile."""
import os, struct
import h2.config, h2.connection, hpack

D = os.path.join('corpus', 'h2_frames')
os.makedirs(D, exist_ok=True)
PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'


def put(name, data):
    with open(os.path.join(D, name), 'wb') as f:
        f.write(data)


def client(validate=True):
    c = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding='utf-8',
        validate_outbound_headers=validate,
        normalize_outbound_headers=validate))
    c.initiate_connection()
    return c


def out(c):
    b = c.data_to_send()
    return b[len(PREFACE):] if b.startswith(PREFACE) else b


def frame(typ, flags, sid, payload):
    return struct.pack('>I', len(payload))[1:] + bytes([typ, flags]) + \
        struct.pack('>I', sid) + payload


def req(path, auth='a.test', method='GET', extra=()):
    return [(':method', method), (':scheme', 'https'), (':authority', auth),
            (':path', path)] + list(extra)


c = client()
c.send_headers(1, req('/ok'), end_stream=True)
put('get-ok', out(c))

c = client()
c.send_headers(1, req('/denied'), end_stream=True)
c.send_headers(3, req('/ok/2', extra=[('cookie', 'a=1'), ('cookie', 'b=2')]),
               end_stream=True)
put('two-streams', out(c))

c = client()
for i in range(1, 40, 2):
    c.send_headers(i, req('/ok/%d' % i), end_stream=True)
put('many-streams', out(c))

c = client()
c.send_headers(1, req('/ok/up', method='POST',
                      extra=[('content-length', '5')]))
c.send_data(1, b'hello', end_stream=True)
c.send_headers(3, req('/ok/chunked', method='POST'))
c.send_data(3, b'abc')
c.send_data(3, b'def', end_stream=True)
put('post-bodies', out(c))

c = client(validate=False)
c.send_headers(1, req('/ok/cl', method='POST',
                      extra=[('content-length', '10')]))
c.send_data(1, b'abc', end_stream=True)
put('cl-mismatch', out(c))

c = client()
c.send_headers(1, req('/ok', auth='other.test'), end_stream=True)
put('authority-other', out(c))

c = client(validate=False)
c.send_headers(1, [(':method', 'GET'), (':path', '/ok'),
                   ('connection', 'keep-alive'), ('te', 'gzip'),
                   (':authority', 'a.test')], end_stream=True)
put('bad-headers', out(c))

c = client()
c.send_headers(1, req('/ok', extra=[('x-big', 'x' * 5000)]), end_stream=True)
put('header-list-big', out(c))

c = client()
c.send_headers(1, req('/ok/grpc', method='POST', extra=[
    ('content-type', 'application/grpc'), ('te', 'trailers')]))
c.send_data(1, b'\x00\x00\x00\x00\x02\x08\x01')
c.send_headers(1, [('grpc-status', '0')], end_stream=True)
put('grpc-trailers', out(c))

c = client()
c.send_headers(1, req('/ok'), end_stream=False)
c.reset_stream(1)
c.send_headers(3, req('/ok'), end_stream=True)
c.ping(b'12345678')
c.increment_flow_control_window(65536)
c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1})
put('reset-ping-window', out(c))

c = client()
c.send_headers(1, req('/ok', method='HEAD'), end_stream=True)
c.close_connection()
put('head-goaway', out(c))

# raw frames: CONTINUATION flood, stream ids going backwards, PRIORITY
enc = hpack.Encoder()
blk = enc.encode(req('/ok'))
raw = frame(4, 0, 0, b'') + frame(1, 0, 5, blk[:4])
for _ in range(20):
    raw += frame(9, 0, 5, b'')
put('continuation-flood', raw + frame(9, 4, 5, blk[4:]))
enc = hpack.Encoder()
put('id-backwards', frame(4, 0, 0, b'') +
    frame(1, 5, 5, enc.encode(req('/ok'))) +
    frame(1, 5, 3, enc.encode(req('/ok'))))
put('priority-self', frame(4, 0, 0, b'') + frame(2, 0, 1, b'\x00\x00\x00\x01\x10'))
