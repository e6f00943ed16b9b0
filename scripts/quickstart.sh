#!/bin/sh
# Fresh Debian 12 (root): install packages, build, and run airlockd in the
# foreground with conf/airlock.yaml (explicit proxy on 127.0.0.1:3128).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [ ! -f Makefile ]; then
	autoreconf -fi
	./configure --enable-werror
fi
make -j"$(nproc)"
src/airlockd -c conf/airlock.yaml -t
cat <<'MSG'

airlockd is starting in the foreground (Ctrl-C stops it).
Point a client at it, for example:

    export http_proxy=http://127.0.0.1:3128 https_proxy=http://127.0.0.1:3128
    # HTTPS is intercepted with the sandbox's own CA: trust it
    curl -sI --cacert conf/state/ca/local/ca.crt https://pypi.org/simple/
    curl -s  http://example.com/             # denied: 403 JSON

Requests from 127.0.0.1 without credentials use the "local" sandbox. Other
sandboxes authenticate with http://ID:TOKEN@127.0.0.1:3128; a sandbox
without a configured token gets one generated in conf/state/tokens/ID.
Audit records: conf/state/audit.jsonl

MSG
exec src/airlockd -c conf/airlock.yaml
