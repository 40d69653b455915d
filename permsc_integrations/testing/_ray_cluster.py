"""A local multi-node Ray cluster for fault tests and benchmarks, always shut down.

:func:`local_ray_cluster` starts ``ray.cluster_utils.Cluster``: a head with no CPUs (the
driver's node, as on a real cluster where work runs on workers) and ``workers`` worker nodes,
each with a small object store. It runs in a Ray folder of its own (``RAY_TMPDIR``, set for
the block): ``ray.init()`` elsewhere on the machine does not find it, and its processes can be
told from other users' (:meth:`LocalRayCluster.processes`). On the way out every node is
removed and any process of it still alive 30 s later is killed. Needs the ``ray`` extra.

Example (it starts Ray, so not run as a doctest)::

    with local_ray_cluster(workers=2) as cluster:
        subprocess.run(["permsc", "rank", ..., "--engine", "ray",
                        "--ray-address", cluster.address])
        cluster.kill_workers(1)  # a node lost: SIGKILL, no drain
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from permsc_integrations.ray import find_processes

if TYPE_CHECKING:  # optional dependency (the ray extra), imported where used
    from ray._private.node import Node
    from ray.cluster_utils import Cluster

__all__ = ["LocalRayCluster", "local_ray_cluster", "processes_with", "reap"]

OBJECT_STORE = 80 * 2**20
"""Bytes of object store per node: Ray's floor, plenty for rows of text."""


def processes_with(ray_tmpdir: str) -> dict[int, str]:
    """The processes (pid: name) whose environment has ``RAY_TMPDIR=ray_tmpdir`` or which hold
    a file open under that folder: every process a Ray started under it, and nobody else's
    (a node agent's environment can read as overwritten: :mod:`.ray._processes`)."""
    return find_processes(f"RAY_TMPDIR={ray_tmpdir}".encode(), ray_tmpdir)


class LocalRayCluster:
    """The running cluster: ``address`` to join, worker nodes to add or kill."""

    def __init__(self, cluster: Cluster, tmpdir: str, worker_cpus: float) -> None:
        self.cluster, self.tmpdir, self.worker_cpus = cluster, tmpdir, worker_cpus

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    @property
    def workers(self) -> list[Node]:
        return list(self.cluster.worker_nodes)

    def add_worker(self) -> None:
        self.cluster.add_node(
            num_cpus=self.worker_cpus, object_store_memory=OBJECT_STORE, include_dashboard=False
        )
        self.cluster.wait_for_nodes()

    def kill_workers(self, n: int) -> None:
        """Kill ``n`` worker nodes at once (their raylets and workers, SIGKILL, no drain)."""
        for node in self.workers[:n]:
            self.cluster.remove_node(node, allow_graceful=False)

    def processes(self) -> dict[int, str]:
        """This cluster's processes, and those of any driver started inside the block."""
        return processes_with(self.tmpdir)


@contextmanager
def local_ray_cluster(workers: int = 2, worker_cpus: float = 1) -> Iterator[LocalRayCluster]:
    """A head with no CPUs and ``workers`` worker nodes (see the module docstring)."""
    # lazy: optional dependency (the ray extra)
    from ray.cluster_utils import Cluster

    before = os.environ.get("RAY_TMPDIR")
    tmpdir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths are long
    os.environ["RAY_TMPDIR"] = tmpdir
    cluster = None
    try:
        head = {"num_cpus": 0, "object_store_memory": OBJECT_STORE, "include_dashboard": False}
        cluster = Cluster(initialize_head=True, head_node_args=head)
        local = LocalRayCluster(cluster, tmpdir, worker_cpus)
        for _ in range(workers):
            local.add_worker()
        yield local
    finally:
        if cluster is not None:
            cluster.shutdown()
        reap(tmpdir)
        shutil.rmtree(tmpdir, ignore_errors=True)
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before


def reap(tmpdir: str, grace: float = 30.0) -> dict[int, str]:
    """Wait up to ``grace`` s for the processes of a Ray under ``tmpdir`` to end; kill those
    that do not, and return them."""
    deadline = time.monotonic() + grace
    while processes_with(tmpdir) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_with(tmpdir)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left
