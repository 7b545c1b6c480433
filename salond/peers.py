"""Who is on the other end of a loopback TCP connection: the user id that owns the
client's socket, read from the kernel.

A connection to 127.0.0.1 (or ::1) comes from a process of this machine, and the kernel
knows which user made its socket. Two sources, tried in this order:

* netlink sock_diag (INET_DIAG): one exact query for the socket whose local end is the
  client's address and port and whose remote end is ours (what `ss` asks); no file is
  read and the answer does not grow with the number of sockets;
* /proc/net/tcp and /proc/net/tcp6: the table's row for that same socket, its `uid`
  column.

`owner(client, server)` answers the uid, or UNKNOWN when neither source can say (another
OS, a container that hides the tables, a client that is already gone). The caller
decides what unknown means (salon.gate: tokens for everyone). `source` forces one way
("netlink", "proc") or none ("off": every owner unknown, a diagnostic). Standard library
only.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

UNKNOWN = -1

# The ASGI scope key that marks a request whose caller could not be told (salon.gate):
# /mcp and /notify then want a token from it, whatever its label.
TOKENS_REQUIRED = "salon.tokens_required"

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NO_COOKIE = 0xFFFFFFFF
# nlmsghdr (16) + inet_diag_msg's family/state/timer/retrans (4) + inet_diag_sockid (48)
# + expires, rqueue, wqueue (12): then uid and inode.
_UID_OFFSET = 16 + 4 + 48 + 12
_TIMEOUT = 0.5
SOURCES = ("auto", "netlink", "proc", "off")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_loopback(host: str) -> bool:
    address = _address(host or "")
    return address is not None and address.is_loopback


def _sockid(client, server) -> tuple[int, bytes] | None:
    """(the address family, inet_diag_sockid) of the client's socket, or None."""
    local, remote = _address(client[0]), _address(server[0])
    if local is None or remote is None or local.version != remote.version:
        return None
    family = socket.AF_INET if local.version == 4 else socket.AF_INET6
    ports = struct.pack("!HH", int(client[1]), int(server[1]))
    return family, (
        ports
        + local.packed.ljust(16, b"\0")
        + remote.packed.ljust(16, b"\0")
        + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE)
    )


def from_netlink(client, server) -> int:
    found = _sockid(client, server)
    if found is None:
        return UNKNOWN
    family, sockid = found
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, NO_COOKIE) + sockid
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as link:
            link.settimeout(_TIMEOUT)
            link.sendto(header + request, (0, 0))
            answer = link.recv(8192)
    except (OSError, AttributeError, ValueError):  # no netlink here (AttributeError: no AF_)
        return UNKNOWN
    if len(answer) < _UID_OFFSET + 4:
        return UNKNOWN
    _length, kind = struct.unpack_from("=IH", answer)
    if kind != SOCK_DIAG_BY_FAMILY:
        return UNKNOWN  # NLMSG_ERROR: no such socket, or sock_diag not loaded
    uid, inode = struct.unpack_from("=II", answer, _UID_OFFSET)
    return uid if inode else UNKNOWN  # no inode: closed, see _closed


def _proc_hex(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    """An address and port as /proc/net/tcp* writes them: each 32-bit word in the
    machine's byte order, in hex, then the port in hex."""
    packed = address.packed
    words = [packed[i : i + 4] for i in range(0, len(packed), 4)]
    order = "<I" if struct.pack("=I", 1)[0] == 1 else ">I"
    text = "".join(f"{struct.unpack(order, w)[0]:08X}" for w in words)
    return f"{text}:{port:04X}"


def from_proc(client, server, root: str = "/proc/net") -> int:
    local, remote = _address(client[0]), _address(server[0])
    if local is None or remote is None:
        return UNKNOWN
    wanted = []
    if local.version == 4:
        mapped = [ipaddress.IPv6Address("::ffff:" + str(a)) for a in (local, remote)]
        wanted.append(("tcp", _proc_hex(local, client[1]), _proc_hex(remote, server[1])))
        wanted.append(("tcp6", _proc_hex(mapped[0], client[1]), _proc_hex(mapped[1], server[1])))
    else:
        wanted.append(("tcp6", _proc_hex(local, client[1]), _proc_hex(remote, server[1])))
    for table, ours, theirs in wanted:
        try:
            with open(os.path.join(root, table), encoding="ascii", errors="replace") as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) > 9 and fields[1] == ours and fields[2] == theirs:
                        owned = fields[7].isdigit() and fields[9] not in ("", "0")
                        return int(fields[7]) if owned else UNKNOWN  # see _closed
        except OSError:
            continue
    return UNKNOWN


# _closed: a client socket its process has closed (orphaned, or in TIME_WAIT, which the
# kernel keeps for a minute: a close() right after a request is sent gets there before
# the server reads it) has no inode any more, and the kernel reports its uid as 0, root's,
# whoever made it. Such a socket has no owner to tell: UNKNOWN, never uid 0.


def owner(client, server, source: str = "auto") -> int:
    """The uid owning the socket at `client` (host, port) connected to `server`, or
    UNKNOWN."""
    if not client or not server or source == "off":
        return UNKNOWN
    try:
        client, server = (str(client[0]), int(client[1])), (str(server[0]), int(server[1]))
    except (TypeError, ValueError, IndexError):
        return UNKNOWN
    if source in ("auto", "netlink"):
        uid = from_netlink(client, server)
        if uid != UNKNOWN or source == "netlink":
            return uid
    return from_proc(client, server)


def works(source: str = "auto") -> bool:
    """Whether the owner of a loopback connection can be read here: a connection of our
    own, made and looked up (`salon install` asks, to know whether tokens are needed)."""
    try:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            with socket.create_connection(listener.getsockname(), timeout=2) as client:
                accepted, _ = listener.accept()
                with accepted:
                    return owner(client.getsockname(), listener.getsockname(), source) == (
                        os.geteuid()
                    )
    except OSError:
        return False


def allowed_uids(items: list[str]) -> frozenset[int]:
    """AGENT_SALON_PEERS's items as user ids: a user name, a uid, or `@group` (every
    member, and every user whose primary group it is). ValueError names an item that is
    no user or group of this machine. Read once, when the settings are."""
    import grp
    import pwd

    uids: set[int] = set()
    for item in items:
        if item.isdigit():
            uids.add(int(item))
        elif item.startswith("@"):
            try:
                group = grp.getgrnam(item[1:])
            except KeyError:
                raise ValueError(f"{item!r}: there is no group {item[1:]!r} here") from None
            for name in group.gr_mem:
                try:
                    uids.add(pwd.getpwnam(name).pw_uid)
                except KeyError:
                    continue  # a member without an entry of its own: nobody to let in
            uids.update(user.pw_uid for user in pwd.getpwall() if user.pw_gid == group.gr_gid)
        else:
            try:
                uids.add(pwd.getpwnam(item).pw_uid)
            except KeyError:
                raise ValueError(f"{item!r}: there is no user {item!r} here") from None
    return frozenset(uids)
