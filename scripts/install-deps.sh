#!/bin/sh
# Debian 12 packages airlock needs. --test adds what the test suite and the
# benchmarks use. qemu, busybox-static, cpio, kmod, xz-utils and curl are
# for launcher.backend qemu and its guest image (scripts/build-guest.sh
# copies curl into it). Run as root on a fresh machine.
set -eu
PKGS="build-essential autoconf automake libtool pkg-config
      libssl-dev libevent-dev libyaml-dev libmaxminddb-dev libjson-c-dev
      libyajl-dev libseccomp-dev zlib1g-dev libbrotli-dev libnghttp2-dev
      check node-llhttp libhiredis-dev libwslay-dev openssl ca-certificates nftables
      busybox-static cpio kmod xz-utils curl"
# without its recommends (GUI, firmware for other machines: some 170
# packages): microvm boots the kernel directly with qboot (qemu-system-data)
QEMU_PKGS="qemu-system-x86"
TEST_PKGS="curl python3 python3-websocket procps iproute2 nftables squid tinyproxy
           libmaxmind-db-writer-perl python3-prometheus-client python3-brotli
           bind9-dnsutils clang libclang-rt-14-dev"
# fleet mode (53x-fleet-*): the shared store and the load balancer
TEST_PKGS="$TEST_PKGS redis-server redis-tools haproxy"
# HTTP/2 and gRPC clients and servers of 55x (issue 19)
TEST_PKGS="$TEST_PKGS nghttp2-client nghttp2-server python3-h2 python3-grpcio"
# 560-h2-nghttp: socat does the CONNECT for nghttp (no proxy option)
TEST_PKGS="$TEST_PKGS socat"
# bench/h2bench.sh: h2load (nghttp2-client, above), socat, mitmdump
TEST_PKGS="$TEST_PKGS mitmproxy"
# bench/kaprofile.sh and bench/h2profile.sh cg: callgrind
TEST_PKGS="$TEST_PKGS valgrind"
# real clients of 405/406 (run with the system python, /usr/bin/python3)
TEST_PKGS="$TEST_PKGS python3-requests python3-websocket"
# 59x (parent proxies, the SOCKS5 listener): a SOCKS5 parent, and ssh
# through SOCKS5 (nc -X 5) to an sshd the test starts
TEST_PKGS="$TEST_PKGS microsocks openssh-server openssh-client netcat-openbsd"
# 570-secrets-brokers: the mock token endpoints verify RS256 JWTs
TEST_PKGS="$TEST_PKGS python3-cryptography"
# 470-deb-package builds the Debian package (dpkg-buildpackage, debhelper),
# installs it and rotates its audit log; devscripts without its
# recommends (mail and web tooling)
DEB_PKGS="dpkg-dev debhelper devscripts fakeroot adduser logrotate"
if [ "${1:-}" = "--test" ]; then
	PKGS="$PKGS $TEST_PKGS"
fi
missing() {
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		    grep -q "ok installed" || printf ' %s' "$p"
	done
}
# The client compatibility suite (45x-compat-*): git, Debian's python
# clients (the system python's), node and npm; a node installed otherwise
# (e.g. nodesource's, which bundles npm) is kept.
if [ "${1:-}" = "--test" ]; then
	PKGS="$PKGS git python3-websocket python3-requests python3-httpx
	      python3-aiohttp"
	if ! command -v node >/dev/null 2>&1 ||
	    ! command -v npm >/dev/null 2>&1; then
		PKGS="$PKGS nodejs npm"
	fi
fi
export DEBIAN_FRONTEND=noninteractive
updated=""
# apt_install [APT-OPTION...] -- PACKAGE...
apt_install() {
	opts=""
	while [ "$1" != "--" ]; do opts="$opts $1"; shift; done
	shift
	m=$(missing "$@")
	[ -n "$m" ] || return 0
	echo "installing:$m"
	[ -n "$updated" ] || { apt-get update -qq; updated=1; }
	# shellcheck disable=SC2086
	apt-get install -y -qq $opts $m >/dev/null
}
# shellcheck disable=SC2086
apt_install -- $PKGS
# shellcheck disable=SC2086
apt_install --no-install-recommends -- $QEMU_PKGS
if [ "${1:-}" = "--test" ]; then
	# shellcheck disable=SC2086
	apt_install --no-install-recommends -- $DEB_PKGS
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
# The node packages of the compatibility suite (ws, http-proxy-agent,
# https-proxy-agent, and the LLM SDKs openai and @anthropic-ai/sdk of
# 493/495), exactly as tests/compat/package-lock.json pins them.
if [ "${1:-}" = "--test" ]; then
	compat=$(cd "$(dirname "$0")/../tests/compat" && pwd)
	(cd "$compat" && npm ci --no-audit --no-fund --loglevel=error)
fi
exit 0
