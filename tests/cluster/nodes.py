"""Several machines on one: network namespaces joined by a bridge, each a "node" with its
own hostname and address, so that a multi-node command runs across real network interfaces
rather than loopback.

Each node is a namespace (`ptc-node0`, ...) holding one end of a veth pair; the other end
is on the bridge `ptc-br`, which also carries the host's own address in the range, so the
host reaches every node. Addresses are in 10.213.0.0/24, which exists only inside this
machine. `ip netns exec` mounts `/etc/netns/<namespace>/hosts` over `/etc/hosts`, so inside
a node the names node0, node1, ... resolve to the nodes' addresses, and `unshare --uts`
gives each node its own hostname: gloo finds the address to bind to through it, as on a
cluster. A rate (Mbit/s) shapes each node's link both ways with HTB, on the two ends of its
veth, bare TCP ACKs first (this kernel has no netem, so no latency can be added).

Everything made carries the prefix `ptc-`, and `teardown` removes all of it: the processes
left in the namespaces, the links, the namespaces and their files. It runs on leaving the
`Nodes` block, whether the block ended, raised or was interrupted, and before making new
nodes, for what a killed run left. Linux and root only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "ptc-"
BRIDGE = f"{PREFIX}br"
SUBNET = "10.213.0"
HOST_ADDRESS = f"{SUBNET}.1"
NETNS_ETC = Path("/etc/netns")


@dataclass(frozen=True)
class Node:
    index: int

    @property
    def namespace(self) -> str:
        return f"{PREFIX}node{self.index}"

    @property
    def hostname(self) -> str:
        return f"node{self.index}"

    @property
    def address(self) -> str:
        return f"{SUBNET}.{10 + self.index}"

    @property
    def host_end(self) -> str:
        """The veth end on the bridge (interface names are at most 15 characters)."""
        return f"{PREFIX}v{self.index}"

    @property
    def node_end(self) -> str:
        return f"{PREFIX}e{self.index}"

    def command(self, argv: list[str]) -> list[str]:
        """`argv` as this node runs it: in its namespace, under its hostname."""
        named = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname]
        return ["ip", "netns", "exec", self.namespace, *named, *argv]


def unsupported() -> str | None:
    """Why nodes cannot be made here, or None."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's; run this on Linux"
    if os.geteuid() != 0:
        return "making network namespaces needs root; run this as root (or with sudo)"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "needs `ip` and `tc` (Debian: apt-get install iproute2)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _shape(netns: list[str], device: str, rate_mbit: float) -> None:
    """Every packet leaving `device` at most `rate_mbit` (HTB), a TCP ACK ahead of the data.

    With one first-in-first-out queue, a node that sends and receives at once (a ring's or
    a butterfly's exchange) put its ACKs for the incoming flow behind its own outgoing
    data, up to a whole queue of it (1,000 packets, 121 ms at 100 Mbit/s). The peer then
    waits for ACKs and both directions slow down: at N = 8 on 100 Mbit/s links the butterfly
    at 4 MiB took 1.6 s where its wire time is about 1.0 s. A real host's default queue
    (fq_codel, which this kernel lacks) sends such sparse flows first; here TCP packets
    shorter than 128 bytes (a bare ACK, with its SACK blocks) get a class of their own that
    goes first, within the same rate. A data segment that short goes first too, ahead of
    its own flow's queue, and arrives out of order; matching the ACK flag alone, which
    keeps the order, made the ring at N = 8 slower (0.39 to 0.61 s, with the 64 KiB
    segments below), so the shorter rule stays.

    The link also hands the queue segments of at most 8 packets (`gso_max_segs`, 11.6 kB,
    1.9 ms at 50 Mbit/s) instead of up to 64 KiB: HTB sends a segment whole, so a link
    carried bursts of 10 ms, and the ring at N = 8, 1 MiB took 0.33, 0.42 or 0.51 s per run
    (one or two stalls of 90 ms; the senders counted about 280 SACK recoveries per 30 runs).
    With 8, its 60 runs took 0.316 to 0.339 s. With 1 (every packet alone) they took 0.35 to
    0.46 s, and the ranks' CPU time rose three- to fivefold, sending packet by packet.
    """
    subprocess.run([*netns, "ip", "link", "set", "dev", device, "gso_max_segs", "8"], check=True)
    on = [*netns, "tc"]
    rate, each = f"{rate_mbit:g}mbit", f"dev {device} parent 1:1 classid"
    for command in (
        f"qdisc add dev {device} root handle 1: htb default 10",
        f"class add dev {device} parent 1: classid 1:1 htb rate {rate} quantum 1514",
        f"class add {each} 1:10 htb rate {rate_mbit - 1:g}mbit ceil {rate} prio 1 quantum 1514",
        f"class add {each} 1:20 htb rate 1mbit ceil {rate} prio 0 quantum 1514",
        f"filter add dev {device} parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff "
        "match u16 0x0000 0xff80 at 2 flowid 1:20",  # TCP, IP length < 128 bytes
    ):
        subprocess.run([*on, *command.split()], check=True)


def make(count: int, rate_mbit: float | None = None) -> list[Node]:
    """`count` nodes on a fresh bridge, every link at most `rate_mbit` each way if given."""
    nodes = [Node(i) for i in range(count)]
    hosts = "127.0.0.1 localhost\n" + "".join(f"{n.address} {n.hostname}\n" for n in nodes)
    _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{HOST_ADDRESS}/24", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    for n in nodes:
        _ip("netns", "add", n.namespace)
        (NETNS_ETC / n.namespace).mkdir(parents=True, exist_ok=True)
        (NETNS_ETC / n.namespace / "hosts").write_text(hosts)
        _ip("link", "add", n.host_end, "type", "veth", "peer", "name", n.node_end)
        _ip("link", "set", n.host_end, "master", BRIDGE)
        _ip("link", "set", n.host_end, "up")
        _ip("link", "set", n.node_end, "netns", n.namespace)
        inside = ("netns", "exec", n.namespace, "ip")
        _ip(*inside, "addr", "add", f"{n.address}/24", "dev", n.node_end)
        _ip(*inside, "link", "set", n.node_end, "up")
        _ip(*inside, "link", "set", "lo", "up")
        if rate_mbit:
            _shape([], n.host_end, rate_mbit)  # into the node
            _shape(["ip", "netns", "exec", n.namespace], n.node_end, rate_mbit)  # out of it
    return nodes


def leftovers() -> list[str]:
    """Everything of ours that exists now: namespaces, links and namespace folders."""
    spaces = [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line]
    lines = _ip("-o", "link", "show").stdout.splitlines()
    links = [line.split(":")[1].strip().split("@")[0] for line in lines]
    folders = [p.name for p in NETNS_ETC.glob(f"{PREFIX}*")] if NETNS_ETC.exists() else []
    return sorted(
        [f"namespace {s}" for s in spaces if s.startswith(PREFIX)]
        + [f"link {name}" for name in links if name.startswith(PREFIX)]
        + [f"folder {NETNS_ETC / f}" for f in folders]
    )


def teardown() -> None:
    """Remove every process, link, namespace and file of ours; whatever is already gone is
    skipped, so it is safe to call at any moment and more than once."""
    spaces = [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line]
    for space in (s for s in spaces if s.startswith(PREFIX)):
        deadline = time.monotonic() + 10  # a killed process may still write as it goes
        while (pids := _ip("netns", "pids", space, check=False).stdout.split()) and (
            time.monotonic() < deadline
        ):
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        _ip("netns", "del", space, check=False)  # takes the node's veth end and its pair
    for item in leftovers():
        kind, name = item.split(" ", 1)
        if kind == "link":
            _ip("link", "del", name, check=False)
        elif kind == "folder":
            shutil.rmtree(name, ignore_errors=True)


class Nodes:
    """`with Nodes(2) as nodes:` two nodes for the block, and nothing of them after it.

    SIGTERM is turned into KeyboardInterrupt for the block, so a killed run tears down too
    (SIGKILL cannot be caught: the next `Nodes` clears what it left).
    """

    def __init__(self, count: int, rate_mbit: float | None = None):
        self.count, self.rate_mbit = count, rate_mbit

    def __enter__(self) -> list[Node]:
        problem = unsupported()
        if problem:
            raise SystemExit(f"cannot make nodes: {problem}.")
        self._term = signal.signal(signal.SIGTERM, _interrupt)
        teardown()
        try:
            return make(self.count, self.rate_mbit)
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc) -> None:
        teardown()
        signal.signal(signal.SIGTERM, self._term)


def _interrupt(signum, frame):
    raise KeyboardInterrupt
