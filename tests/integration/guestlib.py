"""guestlib: boot the airlock guest image under qemu and talk to its agent.

The qemu argv is the one in guest/INTERFACE.md (the host side mirrors it in
C); the control protocol is the one in docs/guest-image.md:

    frame = 1 byte type, u32 big-endian payload length (<= 65536), payload
    host -> guest: R (u32 argc, u32 envc, argc+envc NUL-terminated strings),
                   I stdin bytes, i stdin EOF, K 1 byte signal number
    guest -> host: O stdout, E stderr, F failure text, X u32 exit status
"""

import os
import re
import socket
import struct
import subprocess
import threading
import time

FRAME_MAX = 65536
QEMU = os.environ.get("QEMU", "qemu-system-x86_64")


def tsc_khz():
    """The host's TSC frequency in kHz, for the guest's tsc_early_khz.

    Under TCG the guest reads the host's TSC. Prefer the kernel's own
    calibration (dmesg), else /proc/cpuinfo's "cpu MHz" (right on hosts
    with constant_tsc)."""
    try:
        log = subprocess.run(["dmesg"], capture_output=True, text=True,
                             timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        log = ""
    for pat in (r"Refined TSC clocksource calibration: ([0-9.]+) MHz",
                r"tsc: Detected ([0-9.]+) MHz processor"):
        m = re.findall(pat, log)
        if m:
            return int(round(float(m[-1]) * 1000))
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return int(round(float(line.split(":")[1]) * 1000))
    raise RuntimeError("cannot tell the TSC frequency")


def qemu_argv(image_dir, run_dir, gid, user="65534:65534", addr=None,
              gw=None, dns=None, tap_fd=None, mac="52:54:00:12:34:56",
              ca=None, khz=None, memory="256M", extra=(),
              kernel="vmlinux", initrd="initramfs.cpio", console_log=True):
    """The qemu command line of guest/INTERFACE.md (console_log adds a
    copy of the console in run_dir/console.log, for post-mortems)."""
    cmdline = ["console=ttyS0", "quiet", "panic=-1",
               "ipv6.disable=1", "tsc_early_khz=%d" % (khz or tsc_khz()),
               "airlock.id=" + gid, "airlock.user=" + user]
    if addr:
        cmdline += ["airlock.addr=" + addr, "airlock.gw=" + gw,
                    "airlock.dns=" + (dns or gw)]
    argv = [QEMU,
            "-M", "microvm,acpi=on,x-option-roms=off,pit=off,pic=off,rtc=on",
            "-accel", "tcg", "-cpu", "max", "-m", memory, "-smp", "1",
            "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
            "-kernel", os.path.join(image_dir, kernel),
            "-initrd", os.path.join(image_dir, initrd),
            "-append", " ".join(cmdline),
            "-chardev", "socket,id=con,path=%s/console.sock,server=on,"
            "wait=off%s" % (run_dir, ",logfile=%s/console.log" % run_dir
                            if console_log else ""),
            "-serial", "chardev:con",
            "-device", "virtio-serial-device",
            "-chardev", "socket,id=ctl,path=%s/ctl.sock,server=on,wait=off"
            % run_dir,
            "-device", "virtserialport,chardev=ctl,name=airlock.ctl"]
    if tap_fd is not None:
        argv += ["-netdev", "tap,id=n0,fd=%d,vhost=off" % tap_fd,
                 "-device", "virtio-net-device,netdev=n0,mac=" + mac]
    if ca:
        argv += ["-fw_cfg", "name=opt/airlock/ca.pem,file=" + ca]
    argv += ["-qmp", "unix:%s/qmp.sock,server=on,wait=off" % run_dir]
    return argv + list(extra)


def _connect_unix(path, deadline):
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            if time.time() > deadline:
                raise
            time.sleep(0.02)


class Guest:
    """One VM: qemu, its console log, its control socket."""

    def __init__(self, image_dir, run_dir, gid, **kw):
        self.run_dir = run_dir
        self.id = gid
        self.console = b""
        self.ready_s = None
        os.makedirs(run_dir, exist_ok=True)
        tap_fd = kw.get("tap_fd")
        self.argv = qemu_argv(image_dir, run_dir, gid, **kw)
        self.t0 = time.time()
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL,
            stdout=open(os.path.join(run_dir, "qemu.log"), "wb"),
            stderr=subprocess.STDOUT,
            pass_fds=(tap_fd,) if tap_fd is not None else ())
        self._con = None
        self._con_eof = False
        self._cond = threading.Condition()
        # qemu drops console output while no client is connected: connect
        # now, not when somebody waits for the marker
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        try:
            self._con = _connect_unix(
                os.path.join(self.run_dir, "console.sock"), self.t0 + 30)
        except OSError:
            with self._cond:
                self._con_eof = True
                self._cond.notify_all()
            return
        while True:
            try:
                b = self._con.recv(4096)
            except OSError:
                b = b""
            with self._cond:
                if not b:
                    self._con_eof = True
                    self._cond.notify_all()
                    return
                self.console += b
                self._cond.notify_all()

    def wait_ready(self, timeout=60):
        """Wait for "AIRLOCK-READY <id>" on the console; returns seconds
        since qemu started. Raises on AIRLOCK-FAIL, qemu's exit or timeout."""
        deadline = self.t0 + timeout
        want = ("AIRLOCK-READY %s" % self.id).encode()
        with self._cond:
            while True:
                lines = [l.rstrip(b"\r") for l in self.console.split(b"\n")]
                if want in lines[:-1] or lines[-1] == want:
                    self.ready_s = time.time() - self.t0
                    return self.ready_s
                for l in lines:
                    if l.startswith(b"AIRLOCK-FAIL"):
                        raise RuntimeError("guest failed: %r" % l)
                if self.proc.poll() is not None or self._con_eof:
                    raise RuntimeError("qemu ended before ready (or its "
                                       "console could not be reached)")
                left = deadline - time.time()
                if left <= 0:
                    raise RuntimeError("no AIRLOCK-READY within %ds" % timeout)
                self._cond.wait(min(left, 0.5))

    def session(self, timeout=10):
        return Session(os.path.join(self.run_dir, "ctl.sock"), timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        con = self._con
        if con is not None:
            con.close()


class Result:
    def __init__(self):
        self._out = []
        self._err = []
        self.fail = b""
        self.status = None

    @property
    def out(self):
        return b"".join(self._out)

    @property
    def err(self):
        return b"".join(self._err)

    def __repr__(self):
        return "Result(status=%r, out=%r, err=%r, fail=%r)" % (
            self.status, self.out[:200], self.err[:200], self.fail)


class Session:
    """One connection to the agent's control port."""

    def __init__(self, path, timeout=10):
        self.sock = _connect_unix(path, time.time() + timeout)
        self.sock.settimeout(timeout)
        self.buf = bytearray()

    def close(self):
        self.sock.close()

    def send(self, ftype, payload=b""):
        self.sock.sendall(ftype.encode() + struct.pack(">I", len(payload)) +
                          payload)

    def send_run(self, argv, env=()):
        p = struct.pack(">II", len(argv), len(env))
        for s in list(argv) + list(env):
            p += s.encode() + b"\0"
        self.send("R", p)

    def send_stdin(self, data):
        for i in range(0, len(data), FRAME_MAX):
            self.send("I", data[i:i + FRAME_MAX])

    def _need(self, n):
        while len(self.buf) < n:
            b = self.sock.recv(65536)
            if not b:
                raise EOFError("agent closed the connection")
            self.buf += b

    def recv(self):
        """The next frame as (type, payload)."""
        self._need(5)
        t, n = self.buf[0:1].decode(), struct.unpack(">I", self.buf[1:5])[0]
        if n > FRAME_MAX:
            raise ValueError("frame of %d bytes" % n)
        self._need(5 + n)
        p = bytes(self.buf[5:5 + n])
        del self.buf[:5 + n]
        return t, p

    def wait_exit(self, res=None):
        res = res or Result()
        while True:
            t, p = self.recv()
            if t == "O":
                res._out.append(p)
            elif t == "E":
                res._err.append(p)
            elif t == "F":
                res.fail += p
            elif t == "X":
                res.status = struct.unpack(">I", p)[0]
                return res
            else:
                raise ValueError("unexpected frame %r" % t)

    def run(self, argv, env=("PATH=/usr/bin:/bin:/usr/sbin:/sbin",),
            stdin=b"", eof=True):
        """Run a command to its end; stdin is sent, then EOF."""
        self.send_run(argv, env)
        if stdin:
            # a writer thread, so a large stdin cannot deadlock against
            # the output the command produces meanwhile
            th = threading.Thread(target=self._feed, args=(stdin, eof))
            th.start()
            res = self.wait_exit()
            th.join()
            return res
        if eof:
            self.send("i")
        return self.wait_exit()

    def _feed(self, data, eof):
        self.send_stdin(data)
        if eof:
            self.send("i")
