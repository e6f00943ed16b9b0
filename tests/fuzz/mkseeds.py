#!/usr/bin/env python3
"""Regenerate tests/fuzz/corpus/ (run from tests/fuzz/). Inputs carry the
small prefix each target reads first (see the target's comment)."""
import glob, json, os, socket, ssl, sys

TD = os.environ.get('TESTDATA', '../../../shared/testdata')

def put(target, name, data):
    d = os.path.join('corpus', target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode('latin-1')
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)

# 1 requests: byte 0 split, byte 1 flags
reqs = {
    'get': 'GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n',
    'post-cl': 'POST /u HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello',
    'post-chunked': 'POST /u HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n',
    'pipeline': 'GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n',
    'connect': 'CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n\x16\x03\x01',
    'upgrade': 'GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
    'http10': 'GET / HTTP/1.0\r\n\r\n',
    'expect': 'PUT /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc',
    'cl-te': 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    'obs-fold': 'GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n',
    # issue 15.6 and 14.10: strict framing, encoded paths, overrides
    'two-spaces': 'GET  / HTTP/1.1\r\nHost: a\r\n\r\n',
    'empty-lines': '\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n',
    'host-userinfo': 'GET / HTTP/1.1\r\nHost: u:p@a\r\n\r\n',
    'connection-cl': 'POST / HTTP/1.1\r\nHost: a\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello',
    'chunk-ext-long': 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;' + 'x' * 4200 + '\r\nhello\r\n0\r\n\r\n',
    'chunk-zeros': 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n' + '0' * 4200 + '5\r\nhello\r\n0\r\n\r\n',
    'connect-cl': 'CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nContent-Length: 5\r\n\r\nhello',
    'enc-slash': 'GET /@scope%2fname HTTP/1.1\r\nHost: a\r\n\r\nGET /v1/..%2Fadmin HTTP/1.1\r\nHost: a\r\n\r\n',
    'dot-params': 'GET /v1/..;/admin HTTP/1.1\r\nHost: a\r\n\r\n',
    'override': 'POST / HTTP/1.1\r\nHost: a\r\nX-HTTP-Method-Override: DELETE\r\nX-HTTP-Method: PUT\r\nX-Original-URL: /admin\r\nContent-Length: 0\r\n\r\n',
}
for k, v in reqs.items():
    put('http_request', k, bytes([len(v) // 2 % 256, 0]) + v.encode())
try:
    with open(os.path.join(TD, 'http1/te-obfuscation-gadgets.jsonl')) as f:
        lines = f.readlines()
    for i in range(0, len(lines), 170):
        g = json.loads(lines[i])['gadget']
        v = ('POST / HTTP/1.1\r\nHost: a\r\n' + g +
             '\r\n\r\n5\r\nhello\r\n0\r\n\r\n')
        put('http_request', 'gadget-%04d' % i, b'\x80\x00' + v.encode('utf-8', 'surrogateescape'))
except OSError:
    print('no te-obfuscation-gadgets; skipped', file=sys.stderr)

# 2 responses: byte 1 bit 0 = response to HEAD
resps = {
    'cl': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello',
    'chunked': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
    'eof': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close',
    '204': 'HTTP/1.1 204 No Content\r\n\r\n',
    '100-200': 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
    'sse': 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n10\r\ndata: {\"a\":1}\n\n\r\n0\r\n\r\n',
    '101': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x00',
    '304': 'HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n',
}
for k, v in resps.items():
    put('http_response', k, bytes([100, 0]) + v.encode())
put('http_response', 'head', bytes([100, 1]) + resps['cl'].encode())

# 3 ClientHellos as Python's ssl (OpenSSL) writes them
def hello(sni, alpn, maxver=None):
    ctx = ssl.create_default_context()
    if alpn:
        ctx.set_alpn_protocols(alpn)
    if maxver:
        ctx.maximum_version = maxver
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = ctx.wrap_bio(i, o, server_hostname=sni)
    try:
        s.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()
ctx = ssl.create_default_context()
put('tls_hello', 'sni-alpn', hello('api.openai.com', ['h2', 'http/1.1']))
put('tls_hello', 'sni', hello('a.test', None))
put('tls_hello', 'tls12', hello('example.com', ['http/1.1'], ssl.TLSVersion.TLSv1_2))
h = hello('split.test', ['http/1.1'])
# the same hello cut into two records
body = h[5:]
rec = lambda b: bytes([0x16, 3, 1, len(b) >> 8, len(b) & 255]) + b
put('tls_hello', 'two-records', rec(body[:40]) + rec(body[40:]))

# 4 config
put('cfg', 'example', open('../../conf/airlock.yaml', 'rb').read())
put('cfg', 'small', 'state_dir: /tmp/x\npolicies:\n  - name: p\n    rules: [{host: "a.test"}, {host: "*.b.test", ports: [443], methods: [GET], paths: ["/v1/*"]}]\nsandboxes:\n  - {id: s1, policy: p, token: "literal:t1"}\n')
put('cfg', 'errors', 'listen:\n  proxy: nope\nlimits:\n  header_bytes: 12Q\npolicies: 3\n')

# 5 meter: byte 0 bits 0-1 dialect (1 openai, 2 anthropic, 3 gemini), bit 2
# sse, bit 3 small bound, bits 4-7 split; byte 1 bits 0-1 the coding the
# body is in (0 identity, 1 gzip, 2 deflate, 3 br); the body follows
import zlib
def meter_codings(data):
    yield 0, data
    yield 1, zlib.compress(data, 9, wbits=16 + 15)
    yield 2, zlib.compress(data, 9)
    try:
        import brotli
        yield 3, brotli.compress(data)
    except ImportError:
        pass
n = 0
GEM = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'data', 'llm')
for prov, d, base in (('openai', 1, os.path.join(TD, 'llm')),
                      ('anthropic', 2, os.path.join(TD, 'llm')),
                      ('gemini', 3, GEM)):
    for p in sorted(glob.glob(os.path.join(base, prov, '*'))):
        if p.endswith('LICENSE'):
            continue
        sse = 4 if p.endswith('.sse') else 0
        data = open(p, 'rb').read()
        if len(data) > 16384:
            continue
        for coding, body in meter_codings(data):
            put('meter', '%s-%s-%d' % (prov, os.path.basename(p), coding),
                bytes([d | sse | 0x80, coding]) + body)
        n += 1
if n == 0:
    put('meter', 'openai-json', b'\x01\x00{"model":"gpt-4o","usage":{"prompt_tokens":3,"completion_tokens":2}}')
    put('meter', 'anthropic-sse', b'\x86\x00event: message_start\ndata: {"type":"message_start","message":{"model":"c","usage":{"input_tokens":3,"output_tokens":1}}}\n\n')
put('meter', 'gzip-json', b'\x01\x01' + zlib.compress(b'{"model":"gpt-4o","usage":{"prompt_tokens":3,"completion_tokens":2}}', 9, wbits=31))

# 6 sec_scan: byte 0 npat-1 | split << 2; len byte + pattern each
def scan(pats, text, split=32):
    b = bytes([(len(pats) - 1) | (split << 2)])
    for p in pats:
        b += bytes([len(p) - 1]) + p
    return b + text
put('sec_scan', 'one', scan([b'secret'], b'my secret is out'))
put('sec_scan', 'overlap', scan([b'abc', b'bcd'], b'xabcdx abcd'))
put('sec_scan', 'basic', scan([b'QWxhZGRpbjpvcGVuIHNlc2FtZQ==', b'open sesame'],
    b'Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ== and open sesame!'))
put('sec_scan', 'nested', scan([b'a', b'aa', b'aaa'], b'aaaaaaa', 10))

# 7 dns: byte 0 type index, byte 1 class/policy/size
for i, nm in enumerate(['api.test', 'API.Test.', 'a.b.example.com', '1.2.3.4',
                        '0x7f.0.0.1', 'bad name.test', 'x\\y.test',
                        'c2VjcmV0.evil.test', 'a' * 64 + '.test']):
    put('dns_name', 'q%d' % i, bytes([i % 8, (i * 2) & 0xff]) + nm.encode())

# 8 admin requests
adm = {
    'healthz': 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
    'status': 'GET /v1/status HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n',
    'create': 'POST /v1/sandboxes HTTP/1.1\r\nContent-Length: 27\r\n\r\n{"policy":"p","id":"fz-1"}\n',
    'claim': 'POST /v1/sandboxes/claim HTTP/1.1\r\nContent-Length: 14\r\n\r\n{"policy":"p"}',
    'usage': 'GET /v1/sandboxes/s1/usage HTTP/1.1\r\n\r\nPOST /v1/sandboxes/s1/usage/reset HTTP/1.1\r\nContent-Length: 0\r\n\r\n',
    'delete': 'DELETE /v1/sandboxes/s1 HTTP/1.1\r\n\r\n',
    'reload': 'POST /v1/reload HTTP/1.1\r\nContent-Length: 0\r\n\r\n',
    'prewarm': 'POST /v1/pool/prewarm HTTP/1.1\r\nContent-Length: 25\r\n\r\n{"policy":"p","count":2}\n',
    'pool': 'GET /v1/pool HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n',
    'list': 'GET /v1/sandboxes HTTP/1.1\r\n\r\n',
}
for k, v in adm.items():
    put('admin', k, v)
