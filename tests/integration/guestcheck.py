"""The guest image checks of 320-guest-image.sh.

usage: guestcheck.py IMAGE_DIR SCRATCH_DIR NET(0|1)

Boots two VMs at once (TCG): A with a tap (when NET=1; this process then
runs in a network namespace of the test's own) and the CA bundle in fw_cfg,
B with no network device and another workload user. Prints one line per
check; exits 1 when one failed.
"""

import fcntl
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

import guestlib

IMAGE, SCRATCH, NET = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
GW, ADDR, PORT, TLS_PORT = "10.232.0.1", "10.232.0.2", 8080, 8443
ENV = ["PATH=/usr/bin:/bin:/usr/sbin:/sbin"]
failed = []


def check(cond, what, detail=None):
    if cond:
        print("ok - " + what)
    else:
        print("not ok - %s%s" % (what, "" if detail is None else
                                 ": %r" % (detail,)))
        failed.append(what)


def open_tap(name):
    """A tap device the way the launcher hands one to qemu (fd=N)."""
    TUNSETIFF = 0x400454ca
    IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack(
        "16sH", name.encode(), IFF_TAP | IFF_NO_PI | IFF_VNET_HDR))
    os.set_inheritable(fd, True)
    for cmd in (["ip", "link", "set", "lo", "up"],
                ["ip", "addr", "add", GW + "/32", "dev", name],
                ["ip", "link", "set", name, "up"],
                ["ip", "route", "add", ADDR + "/32", "dev", name]):
        subprocess.run(cmd, check=True)
    return fd


def make_pki():
    """A CA (handed to the guest through fw_cfg) and a leaf for GW."""
    d = SCRATCH
    ssl_cmds = [
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", "/CN=airlock guest test CA", "-keyout", d + "/ca.key",
         "-out", d + "/ca.pem"],
        ["openssl", "req", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=" + GW,
         "-keyout", d + "/leaf.key", "-out", d + "/leaf.csr"],
        ["openssl", "x509", "-req", "-in", d + "/leaf.csr", "-CA",
         d + "/ca.pem", "-CAkey", d + "/ca.key", "-CAcreateserial",
         "-days", "1", "-extfile", d + "/ext", "-out", d + "/leaf.pem"],
    ]
    with open(d + "/ext", "w") as f:
        f.write("subjectAltName=IP:%s\n" % GW)
    for c in ssl_cmds:
        subprocess.run(c, check=True, capture_output=True)
    return d + "/ca.pem"


def tcp_server(port, tls=False):
    """An HTTP answer on the gateway address, for curl in the guest."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((GW, port))
    srv.listen(4)
    srv.settimeout(120)
    ctx = None
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(SCRATCH + "/leaf.pem", SCRATCH + "/leaf.key")

    def serve():
        while True:
            try:
                c, peer = srv.accept()
            except OSError:
                return
            c.settimeout(20)
            try:
                if ctx:
                    c = ctx.wrap_socket(c, server_side=True)
                c.recv(4096)
                body = ("hello %s%s\n" % (peer[0], " tls" if tls else "")
                        ).encode()
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                          b"Connection: close\r\n\r\n" % len(body) + body)
            except OSError:
                pass
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv


def checks_a(g):
    s = g.session()
    r = s.run(["id", "-u"], ENV)
    check(r.status == 0 and r.out == b"65534\n", "id -u is the default user",
          r)
    r = s.run(["sh", "-c", "echo out; echo err >&2; exit 3"], ENV)
    check(r.status == 3 and r.out == b"out\n" and r.err == b"err\n",
          "stdout and stderr apart, exit status 3", r)
    data = bytes(range(256)) * 1200          # 300 KiB, several frames
    r = s.run(["cat"], ENV, stdin=data)
    check(r.status == 0 and r.out == data, "cat returns its stdin", r)
    env = ["PATH=/usr/bin:/bin", "A=1", "SPACED=two words", "EMPTY="]
    r = s.run(["env"], env)
    check(r.status == 0 and r.out.decode().splitlines() == env,
          "the environment is exactly the one sent", r)
    r = s.run(["no-such-program"], ENV)
    check(r.status == 127 and b"not found" in r.fail,
          "a missing program: F and 127", r)
    r = s.run(["/etc/passwd"], ENV)
    check(r.status == 126 and r.fail, "a file that cannot run: 126", r)
    s.send_run(["sleep", "30"], ENV)
    s.send("K", bytes([15]))
    r = s.wait_exit()
    check(r.status == 128 + 15, "K 15 ends the command with 143", r)
    r = s.run(["sh", "-c", "pwd; ls /proc/$$/fd; hostname"], ENV,
              eof=False)
    check(r.status == 0 and r.out.decode().split() ==
          ["/home/sandbox", "0", "1", "2", "ga"],
          "cwd /home/sandbox, only stdio open, hostname = id", r)
    r = s.run(["sh", "-c", "cat /etc/airlock/ca-bundle.pem; echo @@; "
               "cat /etc/ssl/certs/ca-certificates.crt; echo @@; "
               "curl --version | head -n 1"], ENV)
    ca = open(os.path.join(SCRATCH, "ca.pem"), "rb").read()
    parts = r.out.split(b"@@\n")
    check(r.status == 0 and len(parts) == 3 and parts[0] == ca and
          parts[1] == ca and parts[2].startswith(b"curl "),
          "the CA bundle from fw_cfg is installed; curl runs", r)
    # malformed R (the strings do not match the counts): F + X 126, and
    # the session goes on
    s.send("R", struct.pack(">II", 2, 1) + b"echo\0")
    r = s.wait_exit()
    check(r.status == 126 and r.fail, "malformed R: F and 126", r)
    r = s.run(["echo", "still"], ENV)
    check(r.out == b"still\n", "the session survives a malformed R", r)
    if NET:
        r = s.run(["sh", "-c", "ip -4 -o addr show dev eth0; echo @@; "
                   "ip route; echo @@; cat /etc/resolv.conf; echo @@; "
                   "test -e /proc/sys/net/ipv6 && echo v6 || echo no-v6"],
                  ENV)
        parts = r.out.decode().split("@@\n")
        routes = parts[1].splitlines() if len(parts) > 1 else []
        check(len(parts) == 4 and (" inet %s/32 " % ADDR) in parts[0],
              "eth0 has the /32", r)
        check([l for l in routes if l.startswith("default")] ==
              ["default via %s dev eth0 onlink " % GW] or
              [l.strip() for l in routes if l.startswith("default")] ==
              ["default via %s dev eth0 onlink" % GW],
              "exactly one default route, via the gateway", routes)
        check(len(parts) == 4 and parts[2].strip() == "nameserver " + GW,
              "resolv.conf names the resolver", r)
        check(len(parts) == 4 and parts[3].strip() == "no-v6", "IPv6 off", r)
        r = s.run(["curl", "-sS", "-m", "20",
                   "http://%s:%d/" % (GW, PORT)], ENV)
        check(r.status == 0 and r.out == ("hello %s\n" % ADDR).encode(),
              "curl reaches a TCP server on the gateway address", r)
        # TLS with the CA from fw_cfg: also needs a sane clock and entropy
        r = s.run(["curl", "-sS", "-m", "30",
                   "https://%s:%d/" % (GW, TLS_PORT)], ENV)
        check(r.status == 0 and r.out == ("hello %s tls\n" % ADDR).encode(),
              "curl trusts the fw_cfg CA over TLS", r)
    s.close()

    # a new connection is a new session
    s = g.session()
    r = s.run(["echo", "second"], ENV)
    check(r.out == b"second\n" and r.status == 0,
          "a second session on a new connection", r)
    # disconnect mid-run: the workload's process group is killed
    s.send_run(["sh", "-c", "sleep 300 & echo $!; exec sleep 301"], ENV)
    t, p = s.recv()
    bg = p.decode().strip() if t == "O" else "?"
    s.close()
    # the guest notices the disconnect a moment later (SIGIO, POLLHUP);
    # reconnecting earlier meets the old session: "R while a command
    # runs" (docs/guest-image.md), and the host tries again
    for attempt in range(5):
        time.sleep(0.5 * (attempt + 1))
        s = g.session()
        r = s.run(["sh", "-c", "ps -o pid,args | grep -c '[s]leep 30'; "
                   "kill -0 %s 2>/dev/null && echo alive || echo gone"
                   % bg], ENV)
        if b"R while a command runs" not in r.fail:
            break
        print("# reconnected too early, again")
        s.close()
    check(r.out == b"0\ngone\n", "disconnect mid-run kills the workload", r)
    # an unknown frame type: F + X 126
    s.send("Z", b"")
    r = s.wait_exit()
    check(r.status == 126 and b"protocol error" in r.fail,
          "an unknown frame type: F and 126", r)
    s.close()
    time.sleep(0.3)
    s = g.session()
    r = s.run(["true"], ENV)
    check(r.status == 0, "the agent serves again after a protocol error", r)
    s.close()


def checks_b(g, early):
    # sent before the guest had opened its port, answered after boot
    r = early.wait_exit()
    check(r.status == 0 and r.out == b"early\n",
          "a command sent before AIRLOCK-READY runs after it", r)
    early.close()
    time.sleep(0.3)
    s = g.session()
    r = s.run(["sh", "-c", "id -u; id -g; test -e /sys/class/net/eth0 && "
               "echo eth0 || echo no-eth0; ip route | wc -l; ls -ld "
               "/home/sandbox /tmp | cut -c1-10"], ENV)
    check(r.status == 0 and r.out.decode().split() ==
          ["1234", "4321", "no-eth0", "0", "drwx------", "drwxrwxrwt"],
          "airlock.user is honoured; no network device, no eth0", r)
    s.close()


def main():
    kw = {"ca": make_pki()}
    srvs = []
    if NET:
        kw.update(tap_fd=open_tap("gt0"), addr=ADDR, gw=GW)
        srvs = [tcp_server(PORT), tcp_server(TLS_PORT, tls=True)]
    vms = {"ga": guestlib.Guest(IMAGE, os.path.join(SCRATCH, "a"), "ga",
                                **kw),
           "gb": guestlib.Guest(IMAGE, os.path.join(SCRATCH, "b"), "gb",
                                user="1234:4321")}
    early = None
    try:
        early = vms["gb"].session(timeout=90)
        early.send_run(["echo", "early"], ENV)
        early.send("i")
        for name, g in vms.items():
            try:
                t = g.wait_ready(90)
                print("# %s ready %.2f s after qemu started" % (name, t))
            except RuntimeError as e:
                check(False, "%s boots to AIRLOCK-READY" % name, str(e))
                print("# console of %s:\n%s" % (
                    name, g.console.decode(errors="replace")[-3000:]))
                return
        checks_a(vms["ga"])
        checks_b(vms["gb"], early)
    except Exception as e:      # a hung or broken agent: report, not crash
        check(False, "the protocol exchange", "%s: %s" % (type(e).__name__,
                                                          e))
    finally:
        for g in vms.values():
            g.stop()
        for srv in srvs:
            srv.close()
        if failed:
            for name, g in vms.items():
                print("# console of %s (tail):\n%s" % (
                    name, g.console.decode(errors="replace")[-1500:]))


main()
sys.exit(1 if failed else 0)
