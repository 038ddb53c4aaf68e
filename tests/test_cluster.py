"""A real two-node Ray cluster on test hosts in network namespaces: a node dies, the suite completes.

Follows ../shared/docs/ray-on-this-machine.md: every Ray process listens on a private /24 that the
test makes itself between two namespaces joined by a veth pair; nothing else is contacted.
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


@pytest.fixture
def two_hosts():
    if shutil.which("ip") is None or shutil.which("ray") is None:
        pytest.skip("needs iproute2 and the ray CLI")
    tag = f"{os.getpid() % 10000}{random.randint(0, 99)}"
    head, worker, veth = f"tbh{tag}", f"tbw{tag}", f"tbv{tag}"
    subnet = f"10.211.{random.randint(1, 254)}"
    if _sh("ip", "netns", "add", head, check=False).returncode != 0:
        pytest.skip("creating network namespaces is not permitted here")
    try:
        _sh("ip", "netns", "add", worker)
        _sh("ip", "link", "add", f"{veth}a", "type", "veth", "peer", "name", f"{veth}b")
        _sh("ip", "link", "set", f"{veth}a", "netns", head)
        _sh("ip", "link", "set", f"{veth}b", "netns", worker)
        _sh("ip", "-n", head, "addr", "add", f"{subnet}.1/24", "dev", f"{veth}a")
        _sh("ip", "-n", worker, "addr", "add", f"{subnet}.2/24", "dev", f"{veth}b")
        for ns, dev in ((head, f"{veth}a"), (worker, f"{veth}b")):
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        yield head, worker, subnet
    finally:
        for ns in (worker, head):
            _kill_namespace(ns)
        time.sleep(0.5)
        for ns in (worker, head):
            _sh("ip", "netns", "del", ns, check=False)


def test_suite_completes_on_a_two_node_cluster_when_a_node_dies(tmp_path, two_hosts, request):
    head, worker, subnet = two_hosts
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
    subprocess.run(["ip", "netns", "exec", head, "ray", "start", "--head", f"--node-ip-address={subnet}.1",
                    "--port=6394", "--include-dashboard=false", *common], env=env, check=True, capture_output=True)
    joined = subprocess.run(["ip", "netns", "exec", worker, "ray", "start", f"--address={address}",
                             f"--node-ip-address={subnet}.2", *common], env=env, capture_output=True, text=True)
    assert joined.returncode == 0, joined.stdout[-2000:] + joined.stderr[-2000:]

    suite, results = _suite(tmp_path, n_methods=2), tmp_path / "results"  # 20 jobs of ~0.5 s
    store = Store(results / "slow")
    driver = subprocess.Popen(["ip", "netns", "exec", head, sys.executable, "-m", "tabbench.cli", "run", suite,
                               "--results", str(results), "--address", address, "--no-progress"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not any(r.get("node") == f"{subnet}.2" for r in store.records()):
        assert driver.poll() is None, driver.stderr.read()[-3000:]
        time.sleep(0.2)
    assert any(r.get("node") == f"{subnet}.2" for r in store.records()), "no job ran on the second node"
    _kill_namespace(worker)  # the second node dies mid-run

    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err[-3000:]
    records = store.records()
    assert len(records) == 20 and {r["status"] for r in records} == {"ok"}
    assert {r["node"] for r in records} == {f"{subnet}.1", f"{subnet}.2"}
    assert "20 jobs: 20 ran, 0 skipped (already done), 0 failed (none)." in out
