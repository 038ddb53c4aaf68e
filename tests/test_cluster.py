"""A real three-node Ray cluster on test hosts in network namespaces (tests/netns_cluster.py, after
../shared/docs/ray-on-this-machine.md): a worker node dies holding a job, and the suite completes with every job
recorded once. The test kills every process of its namespaces and deletes them.
"""

import subprocess
import sys
import time

import pytest

from tabbench.store import Store
from tests.conftest import require_ray
from tests.netns_cluster import NamespacesRefused, kill_namespace, namespace_cluster, running_a_job
from tests.test_reliability import _suite


@pytest.fixture
def three_hosts():
    require_ray()
    try:
        with namespace_cluster(3) as cluster:
            yield cluster
    except NamespacesRefused as exc:
        pytest.skip(str(exc))


def test_suite_completes_on_a_three_node_cluster_when_a_worker_dies_holding_jobs(tmp_path, three_hosts):
    """The batch-cluster recipe of docs/running.md on three hosts: head and workers started inside one
    "allocation", then `tabbench run --address`; a worker node dies while it runs a job, and every job is still
    recorded exactly once, the dead node's re-run on the others."""
    cluster = three_hosts
    suite, results = _suite(tmp_path, n_methods=3), tmp_path / "results"  # 30 jobs of ~0.5 s
    store = Store(results / "slow")
    driver = subprocess.Popen(cluster.on(0, sys.executable, "-m", "tabbench.cli", "run", suite, "--results",
                                         str(results), "--address", cluster.address, "--no-progress"),
                              env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim, victim_ip = cluster.hosts[2], cluster.ips[2]
    deadline = time.time() + 300
    while time.time() < deadline and not (any(r.get("node") == victim_ip for r in store.records())
                                          and running_a_job(victim)):
        assert driver.poll() is None, driver.stderr.read()[-3000:]
        time.sleep(0.05)
    assert running_a_job(victim), "the third node never ran a job"
    kill_namespace(victim)  # the worker node dies holding a job

    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err[-3000:]
    records = store.records()
    keys = [r["key"] for r in records]
    assert len(records) == 30 and len(set(keys)) == 30, "a job recorded twice"
    assert {r["status"] for r in records} == {"ok"}
    assert {r["node"] for r in records} == set(cluster.ips)
    assert "30 jobs: 30 ran, 0 skipped (already done), 0 failed (none)." in out
