"""A real three-node Ray cluster on test hosts in network namespaces: a worker node dies holding a job, and
the suite completes with every job recorded once.

Follows ../shared/docs/ray-on-this-machine.md: every Ray process listens on a private /24 that the
test makes itself between three namespaces joined by veth pairs (and a bridge); nothing else is contacted,
and the test kills every process of its namespaces and deletes them (never `ray stop`).
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tabbench.store import Store
from tests.conftest import require_ray
from tests.test_reliability import _suite


def _sh(*cmd, check=True):
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check)


def _ns_pids(ns):
    out = _sh("ip", "netns", "pids", ns, check=False).stdout.split()
    return [int(p) for p in out]


def _kill_namespace(ns):
    for pid in _ns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


#: The ray command, run by this interpreter (a virtual environment may have Ray without its script on PATH).
RAY = [sys.executable, "-m", "ray.scripts.scripts"]


def _running_a_job(ns) -> bool:
    """Whether a Ray worker in the namespace is executing a job now: Ray titles such a process after its task."""
    for pid in _ns_pids(ns):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if fh.read().startswith(b"ray::_remote_execute"):
                    return True
        except OSError:
            continue
    return False


@pytest.fixture
def three_hosts():
    """A head and two worker hosts in network namespaces of their own on one private /24: the shared doc's
    veth pairs, joined by a bridge in the head's namespace so that every host reaches every other."""
    require_ray()
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2")
    tag = f"{os.getpid() % 10000}{random.randint(0, 99)}"
    hosts = [f"tbh{tag}", f"tbw{tag}a", f"tbw{tag}b"]
    subnet = f"10.212.{random.randint(1, 254)}"
    if _sh("ip", "netns", "add", hosts[0], check=False).returncode != 0:
        pytest.skip("creating network namespaces is not permitted here")
    try:
        bridge = f"tbb{tag}"
        _sh("ip", "-n", hosts[0], "link", "add", bridge, "type", "bridge")
        _sh("ip", "-n", hosts[0], "addr", "add", f"{subnet}.1/24", "dev", bridge)
        _sh("ip", "-n", hosts[0], "link", "set", "lo", "up")
        _sh("ip", "-n", hosts[0], "link", "set", bridge, "up")
        for i, ns in enumerate(hosts[1:], start=2):
            veth = f"tbv{tag}{i}"
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "add", f"{veth}a", "type", "veth", "peer", "name", f"{veth}b")
            _sh("ip", "link", "set", f"{veth}a", "netns", hosts[0])
            _sh("ip", "link", "set", f"{veth}b", "netns", ns)
            _sh("ip", "-n", hosts[0], "link", "set", f"{veth}a", "master", bridge)
            _sh("ip", "-n", ns, "addr", "add", f"{subnet}.{i}/24", "dev", f"{veth}b")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", hosts[0], "link", "set", f"{veth}a", "up")
            _sh("ip", "-n", ns, "link", "set", f"{veth}b", "up")
        yield hosts, subnet
    finally:
        for ns in reversed(hosts):
            _kill_namespace(ns)
        time.sleep(0.5)
        for ns in reversed(hosts):
            _sh("ip", "netns", "del", ns, check=False)


def test_suite_completes_on_a_three_node_cluster_when_a_worker_dies_holding_jobs(tmp_path, three_hosts, request):
    """The batch-cluster recipe of docs/running.md on three hosts: head and workers started inside one
    "allocation", then `tabbench run --address`; a worker node dies while it runs a job, and every job is still
    recorded exactly once, the dead node's re-run on the others."""
    hosts, subnet = three_hosts
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # Token authentication, as a real cluster should run: every process of this cluster shares a token.
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN"] = os.urandom(16).hex()
    address = f"{subnet}.1:6394"
    # A temp dir of its own (short: Ray's socket paths must fit 107 bytes), so that nothing of this
    # cluster, such as /tmp/ray/ray_current_cluster, outlives the test.
    temp = tempfile.mkdtemp(prefix="tbray")
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    common = ["--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp}"]
    subprocess.run(["ip", "netns", "exec", hosts[0], *RAY, "start", "--head", f"--node-ip-address={subnet}.1",
                    "--port=6394", "--include-dashboard=false", *common], env=env, check=True, capture_output=True)
    for i, ns in enumerate(hosts[1:], start=2):
        joined = subprocess.run(["ip", "netns", "exec", ns, *RAY, "start", f"--address={address}",
                                 f"--node-ip-address={subnet}.{i}", *common], env=env, capture_output=True, text=True)
        assert joined.returncode == 0, joined.stdout[-2000:] + joined.stderr[-2000:]

    suite, results = _suite(tmp_path, n_methods=3), tmp_path / "results"  # 30 jobs of ~0.5 s
    store = Store(results / "slow")
    driver = subprocess.Popen(["ip", "netns", "exec", hosts[0], sys.executable, "-m", "tabbench.cli", "run", suite,
                               "--results", str(results), "--address", address, "--no-progress"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim, victim_ip = hosts[2], f"{subnet}.3"
    deadline = time.time() + 300
    while time.time() < deadline and not (any(r.get("node") == victim_ip for r in store.records())
                                          and _running_a_job(victim)):
        assert driver.poll() is None, driver.stderr.read()[-3000:]
        time.sleep(0.05)
    assert _running_a_job(victim), "the third node never ran a job"
    _kill_namespace(victim)  # the worker node dies holding a job

    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err[-3000:]
    records = store.records()
    keys = [r["key"] for r in records]
    assert len(records) == 30 and len(set(keys)) == 30, "a job recorded twice"
    assert {r["status"] for r in records} == {"ok"}
    assert {r["node"] for r in records} == {f"{subnet}.{i}" for i in (1, 2, 3)}
    assert "30 jobs: 30 ran, 0 skipped (already done), 0 failed (none)." in out
