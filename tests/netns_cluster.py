"""A real Ray cluster of test hosts in network namespaces, for tests/test_cluster.py and
benchmarks/cluster_throughput.py.

Follows ../shared/docs/ray-on-this-machine.md: each host is a network namespace, the shared doc's veth pairs
joined by a bridge in the head's namespace, so that all of them share one private /24 that this module makes
itself; every Ray process listens there, nothing else is contacted. On leaving, every process of the
namespaces is killed and the namespaces deleted (never `ray stop`, which would stop every Ray on the machine).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass

#: The ray command, run by this interpreter (a virtual environment may have Ray without its script on PATH).
RAY = [sys.executable, "-m", "ray.scripts.scripts"]
PORT = 6394


class NamespacesRefused(RuntimeError):
    """This machine does not let us make network namespaces (not root, no iproute2): the caller skips."""


def _sh(*cmd, check=True):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check)


def ns_pids(ns: str) -> list[int]:
    return [int(p) for p in _sh("ip", "netns", "pids", ns, check=False).stdout.split()]


def kill_namespace(ns: str) -> None:
    """Kill every process of the namespace: how a host dies here."""
    for pid in ns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def running_a_job(ns: str) -> bool:
    """Whether a Ray worker in the namespace is executing a job now: Ray titles such a process after its task."""
    for pid in ns_pids(ns):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if fh.read().startswith(b"ray::_remote_execute"):
                    return True
        except OSError:
            continue
    return False


@dataclass
class Cluster:
    hosts: list  # namespace names, the head first
    ips: list  # their addresses, in the same order
    env: dict  # the environment every process of the cluster (and its driver) runs with

    @property
    def address(self) -> str:
        return f"{self.ips[0]}:{PORT}"

    def on(self, i: int, *cmd) -> list:
        """``cmd`` run on host ``i``."""
        return ["ip", "netns", "exec", self.hosts[i], *cmd]


@contextmanager
def namespace_cluster(n_hosts: int, cpus_per_host: int = 1):
    """A Ray cluster of ``n_hosts`` hosts (a head and workers), each with ``cpus_per_host`` CPUs."""
    if shutil.which("ip") is None:
        raise NamespacesRefused("needs iproute2 (the ip command)")
    tag = f"{os.getpid() % 10000}{random.randint(0, 99)}"
    hosts = [f"tbh{tag}", *(f"tbw{tag}{chr(97 + i)}" for i in range(n_hosts - 1))]
    subnet = f"10.212.{random.randint(1, 254)}"
    ips = [f"{subnet}.{i + 1}" for i in range(n_hosts)]
    if _sh("ip", "netns", "add", hosts[0], check=False).returncode != 0:
        raise NamespacesRefused("creating network namespaces is not permitted here")
    # A temp dir of its own (short: Ray's socket paths must fit 107 bytes), so that nothing of this
    # cluster, such as /tmp/ray/ray_current_cluster, outlives it.
    temp = tempfile.mkdtemp(prefix="tbray")
    made = [hosts[0]]
    try:
        bridge = f"tbb{tag}"
        _sh("ip", "-n", hosts[0], "link", "add", bridge, "type", "bridge")
        _sh("ip", "-n", hosts[0], "addr", "add", f"{ips[0]}/24", "dev", bridge)
        for dev in ("lo", bridge):
            _sh("ip", "-n", hosts[0], "link", "set", dev, "up")
        for i, ns in enumerate(hosts[1:], start=1):
            veth = f"tbv{tag}{i}"
            _sh("ip", "netns", "add", ns)
            made.append(ns)
            _sh("ip", "link", "add", f"{veth}a", "type", "veth", "peer", "name", f"{veth}b")
            _sh("ip", "link", "set", f"{veth}a", "netns", hosts[0])
            _sh("ip", "link", "set", f"{veth}b", "netns", ns)
            _sh("ip", "-n", hosts[0], "link", "set", f"{veth}a", "master", bridge)
            _sh("ip", "-n", ns, "addr", "add", f"{ips[i]}/24", "dev", f"{veth}b")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", hosts[0], "link", "set", f"{veth}a", "up")
            _sh("ip", "-n", ns, "link", "set", f"{veth}b", "up")

        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        # Token authentication, as a real cluster should run: every process of this cluster shares a token.
        env["RAY_AUTH_MODE"] = "token"
        env["RAY_AUTH_TOKEN"] = os.urandom(16).hex()
        cluster = Cluster(hosts, ips, env)
        common = [f"--num-cpus={cpus_per_host}", "--disable-usage-stats", f"--temp-dir={temp}"]
        started = subprocess.run(cluster.on(0, *RAY, "start", "--head", f"--node-ip-address={ips[0]}",
                                            f"--port={PORT}", "--include-dashboard=false", *common),
                                 env=env, capture_output=True, text=True)
        if started.returncode != 0:
            raise RuntimeError(f"ray start --head failed: {started.stdout[-2000:]}{started.stderr[-2000:]}")
        for i in range(1, n_hosts):
            joined = subprocess.run(cluster.on(i, *RAY, "start", f"--address={cluster.address}",
                                               f"--node-ip-address={ips[i]}", *common),
                                    env=env, capture_output=True, text=True)
            if joined.returncode != 0:
                raise RuntimeError(f"ray start on host {i} failed: {joined.stdout[-2000:]}{joined.stderr[-2000:]}")
        yield cluster
    finally:
        for ns in reversed(made):
            kill_namespace(ns)
        time.sleep(0.5)
        for ns in reversed(made):
            _sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(temp, ignore_errors=True)
