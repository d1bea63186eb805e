#!/usr/bin/env python3
"""nfsd's netlink listener-set, as nfsdctl does it ("nfsdctl listener").

Usage: nfsd-listener-set.py TRANSPORT:ADDR:PORT ...   (e.g. rdma:0.0.0.0:20049)

Sends NFSD_CMD_LISTENER_SET of the generic netlink family "nfsd" with one
NFSD_A_SERVER_SOCK_ADDR per argument (NFSD_A_SOCK_ADDR: a struct sockaddr,
NFSD_A_SOCK_TRANSPORT_NAME: the svc transport class name). The list
replaces nfsd's listeners; nfsd accepts it only while no threads run.
Exits 0 on success, else prints the kernel's errno and exits 1.
"""
import ipaddress
import os
import socket
import struct
import sys

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 0x2
NLA_F_NESTED = 0x8000
# include/uapi/linux/nfsd_netlink.h
NFSD_CMD_LISTENER_SET = 6
NFSD_A_SERVER_SOCK_ADDR = 1
NFSD_A_SOCK_ADDR = 1
NFSD_A_SOCK_TRANSPORT_NAME = 2


def attr(kind, payload):
    hdr = struct.pack("=HH", 4 + len(payload), kind)
    pad = b"\0" * ((4 - len(payload) % 4) % 4)
    return hdr + payload + pad


def request(sock, family, cmd, attrs, seq):
    body = struct.pack("=BBH", cmd, 1, 0) + attrs
    msg = struct.pack("=IHHII", 16 + len(body), family, NLM_F_REQUEST | NLM_F_ACK, seq, os.getpid()) + body
    sock.send(msg)
    replies = []
    while True:
        data = sock.recv(65536)
        off = 0
        while off + 16 <= len(data):
            length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, off)
            if kind == NLMSG_ERROR:
                (err,) = struct.unpack_from("=i", data, off + 16)
                return err, replies
            replies.append(data[off + 16 + 4:off + length])
            off += (length + 3) & ~3


def parse_attrs(buf):
    out, off = {}, 0
    while off + 4 <= len(buf):
        length, kind = struct.unpack_from("=HH", buf, off)
        out[kind & 0x3FFF] = buf[off + 4:off + length]
        off += (length + 3) & ~3
    return out


def family_id(sock, name):
    err, replies = request(sock, GENL_ID_CTRL, CTRL_CMD_GETFAMILY,
                           attr(CTRL_ATTR_FAMILY_NAME, name.encode() + b"\0"), 1)
    for r in replies:
        a = parse_attrs(r)
        if CTRL_ATTR_FAMILY_ID in a:
            return struct.unpack("=H", a[CTRL_ATTR_FAMILY_ID][:2])[0]
    raise OSError(-err or 2, "no generic netlink family %r" % name)


def sockaddr(addr, port):
    ip = ipaddress.ip_address(addr)
    if ip.version == 4:
        return struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + ip.packed + b"\0" * 8
    return struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", port, 0) + ip.packed + struct.pack("=I", 0)


def main(args):
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    socks = b""
    for spec in args:
        xprt, rest = spec.split(":", 1)
        addr, port = rest.rsplit(":", 1)
        inner = attr(NFSD_A_SOCK_ADDR, sockaddr(addr.strip("[]"), int(port)))
        inner += attr(NFSD_A_SOCK_TRANSPORT_NAME, xprt.encode() + b"\0")
        socks += attr(NFSD_A_SERVER_SOCK_ADDR | NLA_F_NESTED, inner)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
    sock.bind((0, 0))
    fam = family_id(sock, "nfsd")
    err, _ = request(sock, fam, NFSD_CMD_LISTENER_SET, socks, 2)
    if err:
        print("listener-set failed: %s" % os.strerror(-err), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
