#!/bin/sh
# Debian 12 packages airlock needs. --test adds what the test suite and the
# benchmarks use. Run as root on a fresh machine.
set -eu
PKGS="build-essential autoconf automake libtool pkg-config
      libssl-dev libevent-dev libyaml-dev libmaxminddb-dev libjson-c-dev
      check node-llhttp libhiredis-dev openssl ca-certificates nftables"
TEST_PKGS="curl python3 procps iproute2 nftables squid tinyproxy
           libmaxmind-db-writer-perl python3-prometheus-client
           bind9-dnsutils clang libclang-rt-14-dev"
if [ "${1:-}" = "--test" ]; then
	PKGS="$PKGS $TEST_PKGS"
fi
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
	    missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq $missing >/dev/null
fi
# squid and tinyproxy come with services we do not want running: the
# benchmark starts its own instances on its own ports.
for s in squid tinyproxy; do
	if command -v systemctl >/dev/null 2>&1; then
		systemctl stop "$s" >/dev/null 2>&1 || true
		systemctl disable "$s" >/dev/null 2>&1 || true
	fi
	pkill -x "$s" >/dev/null 2>&1 || true
done
exit 0
