"""Network namespaces that stand for hosts, so that TCP between ranks on two
of them crosses real interfaces (veth pairs, a bridge, an MTU of 1500)
instead of loopback: the hosts of compare.py's netns mode.

Host h is namespace <prefix>-h<h> with address 10.79.0.<h + 1> on its eth0;
the eth0s are veth pairs whose other ends are ports of a bridge in namespace
<prefix>-sw. Rank r runs on host r // ranks_per_host (one rank per host
unless asked otherwise). The launchers (tuttirun, mpirun, mpiexec) stay in the
namespace they were started in, which gets a leg of its own on the bridge
(10.79.0.254 on <leg>): Open MPI's ranks reach mpirun's PMIx server through
TCP and must find it from inside their namespaces. benchmarks/netns_rank.sh
moves each rank into its namespace as it starts.

Creating namespaces needs root (or CAP_SYS_ADMIN) and iproute2; netns_hosts
raises netns_unavailable when it cannot, and removes everything it made on
close (also when creating failed half way).
"""

import os
import signal
import subprocess
import sys

SUBNET = "10.79.0"
LAUNCHER_ADDRESS = f"{SUBNET}.254"


class netns_unavailable(Exception):
    pass


class netns_hosts:
    def __init__(self, ranks, ranks_per_host=1):
        if ranks_per_host < 1:
            raise ValueError(f"the netns mode cannot put {ranks_per_host} ranks on a host: "
                             "at least 1")
        self.ranks_per_host = ranks_per_host
        self.hosts = -(-ranks // ranks_per_host)
        if not 1 <= self.hosts <= 253:
            raise ValueError(f"the netns mode cannot place {ranks} ranks: its subnet holds "
                             "1 to 253 hosts (one address each), and "
                             f"{ranks_per_host} rank(s) per host make {self.hosts}")
        # Names carry the process id, so that two runs at once do not meet;
        # an interface name has at most 15 characters.
        self.prefix = f"tcmp{os.getpid()}"
        self.switch = f"{self.prefix}-sw"
        self.leg = f"tcmp{os.getpid() % 1000000}l"
        self.made = []
        self.leg_made = False
        self.rendezvous_port = 29600

    def host_address(self, host):
        return f"{SUBNET}.{host + 1}"

    def environment(self):
        """What benchmarks/netns_rank.sh and netns_agent.sh need to find each
        rank's and each host's namespace."""
        return {"TUTTI_COMPARE_NETNS": self.prefix,
                "TUTTI_COMPARE_RANKS_PER_HOST": str(self.ranks_per_host)}

    def host_list(self, ranks):
        """The hosts and their slots as mpirun --host and mpiexec -hosts take
        them (h0:2,h1:2): ranks placed in order, ranks_per_host on each."""
        slots = [min(self.ranks_per_host, ranks - h * self.ranks_per_host)
                 for h in range(self.hosts)]
        return ",".join(f"h{h}:{n}" for h, n in enumerate(slots))

    def agent(self):
        """The remote-shell agent through which mpirun and mpiexec start
        their daemons on the hosts (benchmarks/netns_agent.sh)."""
        return os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_agent.sh")

    def wrap(self, program):
        """program (a list), started in its rank's namespace."""
        return [os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_rank.sh")] + program

    def tuttirun_options(self):
        """tuttirun's --rendezvous: rank 0 listens in its namespace, on a new
        port each run, as the last run's may linger in TIME_WAIT."""
        self.rendezvous_port += 1
        return ["--rendezvous", f"{self.host_address(0)}:{self.rendezvous_port}"]

    def _ip(self, *words):
        done = subprocess.run(["ip", *words], capture_output=True, text=True)
        if done.returncode != 0:
            raise netns_unavailable(f"ip {' '.join(words)}: {done.stderr.strip()}")

    def __enter__(self):
        try:
            self._ip("netns", "add", self.switch)
        except FileNotFoundError:
            raise netns_unavailable("iproute2's ip is not installed")
        self.made.append(self.switch)
        try:
            self._ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            self._ip("-n", self.switch, "link", "set", "br0", "up")
            for host in range(self.hosts):
                ns = f"{self.prefix}-h{host}"
                self._ip("netns", "add", ns)
                self.made.append(ns)
                self._ip("-n", ns, "link", "set", "lo", "up")
                self._ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name",
                         f"port{host}", "netns", self.switch)
                self._ip("-n", self.switch, "link", "set", f"port{host}", "master", "br0")
                self._ip("-n", self.switch, "link", "set", f"port{host}", "up")
                self._ip("-n", ns, "addr", "add", f"{self.host_address(host)}/24", "dev", "eth0")
                self._ip("-n", ns, "link", "set", "eth0", "up")
            self._ip("link", "add", self.leg, "type", "veth", "peer", "name", "portl", "netns",
                     self.switch)
            self.leg_made = True
            self._ip("-n", self.switch, "link", "set", "portl", "master", "br0")
            self._ip("-n", self.switch, "link", "set", "portl", "up")
            self._ip("addr", "add", f"{LAUNCHER_ADDRESS}/24", "dev", self.leg)
            self._ip("link", "set", self.leg, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        # Deleting a namespace deletes the veth ends in it and so their peers.
        if self.leg_made:
            subprocess.run(["ip", "link", "delete", self.leg], capture_output=True)
            self.leg_made = False
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        self.made = []


def enter_hosts(stack, ranks, who, ranks_per_host=1):
    """netns_hosts for ranks, closed by the contextlib.ExitStack stack, also
    on SIGTERM (which then unwinds as SystemExit); exits naming the reason
    where namespaces cannot be made."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return stack.enter_context(netns_hosts(ranks, ranks_per_host))
    except ValueError as e:
        sys.exit(f"{who}: {e}")
    except netns_unavailable as e:
        sys.exit(f"{who}: cannot make network namespaces here ({e}); the netns mode needs "
                 "root (or CAP_SYS_ADMIN) and iproute2")
