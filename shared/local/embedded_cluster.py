"""A real Redis Cluster of N primaries on free ports, for the tests and the benchmarks.

A single redis-server accepts what a cluster refuses (keys of different slots in one script,
one transaction, one multi-key command); only a real cluster shows those refusals. The nodes
are formed without redis-cli, each a child that dies with the test process.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis
import redis.cluster

from shared.local.children import die_with_parent
from shared.local.embedded_redis import find_redis_server, free_port

__all__ = ["SLOTS", "RedisClusterNodes"]

SLOTS = 16384
_PLACEMENTS = 4  # tries at starting the nodes, each on newly picked ports


class _PortTaken(RuntimeError):
    """A node exited because a port picked for it was taken before it bound it."""


def _free_ports(count: int) -> list[int]:
    """`count` distinct free ports: a node's client port and its bus port each need one."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class RedisClusterNodes:
    """Starts, forms and stops a cluster of `primaries` redis-servers, no replicas.

    Node i owns the even slot range [i*16384//N, (i+1)*16384//N - 1], as redis-cli would
    assign it; each node has its own temporary directory with its config file and log.
    """

    def __init__(self, primaries: int = 3) -> None:
        if primaries < 1:
            raise ValueError("a cluster needs at least one primary")
        self.primaries = primaries
        self.ports: list[int] = []
        self.bus_ports: list[int] = []
        self.dirs: list[Path] = []
        self._place()
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * primaries

    def _place(self) -> None:
        """Free ports and fresh directories for every node."""
        # the bus port is set explicitly: port + 10000 may lie past 65535 for a free port
        ports = _free_ports(2 * self.primaries)
        self.ports, self.bus_ports = ports[: self.primaries], ports[self.primaries :]
        # absolute: redis-server changes into its data directory before opening the log
        root = Path(tempfile.mkdtemp(prefix="signoff-redis-cluster-")).resolve()
        self.dirs = [root / f"node{i}" for i in range(self.primaries)]

    @property
    def url(self) -> str:
        """A cluster URL: any node answers with the cluster's map."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def slot_range(self, index: int) -> tuple[int, int]:
        """The first and last slot node `index` owns."""
        return (
            index * SLOTS // self.primaries,
            (index + 1) * SLOTS // self.primaries - 1,
        )

    def log(self, index: int) -> Path:
        return self.dirs[index] / "redis.log"

    def start(self, timeout_s: float = 20.0) -> RedisClusterNodes:
        """Starts every node and forms the cluster; on any failure, stops what it started.

        A free port is free only when it is picked: on a busy machine another process's
        connection may take it before the node binds it. A node that finds its port taken
        is started again, with the others, on newly picked ones."""
        for _ in range(_PLACEMENTS - 1):
            try:
                return self._start(timeout_s)
            except _PortTaken:
                self._place()
        return self._start(timeout_s)

    def _start(self, timeout_s: float) -> RedisClusterNodes:
        try:
            for index in range(self.primaries):
                self._spawn(index)
            deadline = time.monotonic() + timeout_s
            self._wait(deadline, self._answers, "answering")
            self._form()
            self._wait(deadline, self._formed, "formed (cluster_state:ok, every primary known)")
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, index: int) -> None:
        data_dir = self.dirs[index]
        data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            find_redis_server(),
            "--port",
            str(self.ports[index]),
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            str(self.bus_ports[index]),
            "--cluster-config-file",
            str(data_dir / "nodes.conf"),
            "--cluster-node-timeout",
            "2000",
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory-policy",
            "noeviction",
            "--daemonize",
            "no",
            "--logfile",
            str(self.log(index)),
        ]
        # as embedded_redis._popen: the node dies with this process, even a SIGKILLed one
        self.processes[index] = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),
        )

    def _node(self, index: int) -> redis.Redis:
        return redis.Redis(
            port=self.ports[index],
            socket_connect_timeout=0.5,
            socket_timeout=2.0,
            decode_responses=True,
        )

    def _form(self) -> None:
        """Slots first, then a distinct config epoch each (no collisions to settle), then meet."""
        for index in range(self.primaries):
            node = self._node(index)
            try:
                node.execute_command("CLUSTER ADDSLOTSRANGE", *self.slot_range(index))
                node.execute_command("CLUSTER SET-CONFIG-EPOCH", index + 1)
                if index > 0:
                    node.execute_command(
                        "CLUSTER MEET", "127.0.0.1", self.ports[0], self.bus_ports[0]
                    )
            finally:
                node.close()

    def _answers(self, index: int) -> bool:
        node = self._node(index)
        try:
            return bool(node.ping())
        except redis.ConnectionError:
            return False
        finally:
            node.close()

    def _formed(self, index: int) -> bool:
        """The node says the cluster is ok and knows every primary (none in handshake)."""
        node = self._node(index)
        try:
            info = node.execute_command("CLUSTER INFO")  # redis-py parses both into dicts
            nodes = node.execute_command("CLUSTER NODES")
        except redis.ConnectionError:
            return False
        finally:
            node.close()
        if info.get("cluster_state") != "ok":
            return False
        unsettled = {"handshake", "fail", "fail?", "noaddr"}
        masters = 0
        for entry in nodes.values():
            flags = set(entry["flags"].split(","))
            if "master" in flags and not flags & unsettled:
                masters += 1
        return masters == self.primaries

    def _wait(self, deadline: float, ready: Callable[[int], bool], what: str) -> None:
        """Polls `ready(index)` for every node until the deadline; names the log of a laggard."""
        pending = set(range(self.primaries))
        while True:
            for index in sorted(pending):
                process = self.processes[index]
                if process is not None and process.poll() is not None:
                    exited = _PortTaken if self._port_taken(index) else RuntimeError
                    raise exited(
                        f"cluster node {index} (port {self.ports[index]}) exited; "
                        f"see {self.log(index)}"
                    )
                if ready(index):
                    pending.discard(index)
            if not pending:
                return
            if time.monotonic() >= deadline:
                index = min(pending)
                raise RuntimeError(
                    f"Redis Cluster not ready in time: node {index} (port {self.ports[index]}) "
                    f"is not {what}; see {self.log(index)}"
                )
            time.sleep(0.05)

    def _port_taken(self, index: int) -> bool:
        """The node's log says one of its ports was taken by the time it bound it."""
        try:
            return "Address already in use" in self.log(index).read_text(errors="replace")
        except OSError:
            return False

    def client(self) -> redis.cluster.RedisCluster:
        """A cluster client that knows every node, so it still starts when one is killed."""
        return redis.cluster.RedisCluster(
            startup_nodes=[redis.cluster.ClusterNode("127.0.0.1", port) for port in self.ports],
            decode_responses=True,
        )

    def stop(self) -> None:
        """Terminates every node and waits for it; the data directories stay for reading."""
        for index, process in enumerate(self.processes):
            if process is None:
                continue
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self.processes[index] = None

    def kill_node(self, index: int) -> None:
        """SIGKILLs one node, as a crash would: the others see it fail after the node timeout."""
        process = self.processes[index]
        if process is None:
            return
        process.kill()
        process.wait()
        self.processes[index] = None

    def restart_node(self, index: int, timeout_s: float = 20.0) -> None:
        """Starts a killed node again on its port and config file (its slots, not its data:
        nodes keep nothing on disk) and waits until the cluster is whole again."""
        if self.processes[index] is not None:
            raise ValueError(f"node {index} is running")
        self._spawn(index)
        deadline = time.monotonic() + timeout_s
        self._wait(deadline, self._answers, "answering")
        self._wait(deadline, self._formed, "formed (cluster_state:ok, every primary known)")

    def __enter__(self) -> RedisClusterNodes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
