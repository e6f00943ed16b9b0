"""A tiny authoritative DNS server for tests: UDP on 127.0.0.1, answers
A and AAAA for the names given as NAME=ADDR[,ADDR...] arguments (both
families per name), NXDOMAIN for others. Writes its port to -P FILE."""
import socket
import struct
import sys


def main():
    args = sys.argv[1:]
    portfile = args[args.index("-P") + 1]
    names = {}
    for a in args:
        if "=" in a:
            n, v = a.split("=", 1)
            names[n.lower()] = v.split(",")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    import os
    os.rename(portfile + ".tmp", portfile)
    while True:
        q, peer = s.recvfrom(2048)
        if len(q) < 12:
            continue
        qid, flags, qd = struct.unpack(">HHH", q[:6])
        i, labels = 12, []
        while i < len(q) and q[i] != 0:
            labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
            i += 1 + q[i]
        qtype, qclass = struct.unpack(">HH", q[i + 1:i + 5])
        question = q[12:i + 5]
        name = ".".join(labels).lower()
        answers = []
        rcode = 0
        if name not in names:
            rcode = 3
        else:
            for addr in names[name]:
                fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
                t = 28 if fam == socket.AF_INET6 else 1
                if t != qtype:
                    continue
                rd = socket.inet_pton(fam, addr)
                answers.append(b"\xc0\x0c" + struct.pack(">HHIH", t, 1, 5, len(rd)) + rd)
        head = struct.pack(">HHHHHH", qid, 0x8400 | rcode, 1, len(answers), 0, 0)
        s.sendto(head + question + b"".join(answers), peer)


main()
