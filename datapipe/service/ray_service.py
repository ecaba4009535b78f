"""``RayService``: where a ``distribute`` op's workers run (a Ray cluster, local or not).

Building a ``RayService`` only checks its arguments; Ray is imported and joined (or
started) when a pipeline that uses it first runs, or on ``start()``.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from typing import Any

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# Dispatcher handles of this process, by (service name, Ray job id): checked once against
# the config.
_HANDLES: dict[tuple, Any] = {}


def _check_int(arg: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if type(value).__module__ == "numpy" and hasattr(value, "__index__"):
            value = int(value)
        else:
            raise TypeError(f"RayService: {arg} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"RayService: {arg} must be >= {minimum}, got {value}")
    return int(value)


def parse_address(address: str | None) -> tuple[str, str | None, int | None]:
    """``(kind, host, port)`` of a ``RayService`` address: ``("process", None, None)`` for
    None, ``("auto", ...)`` for ``"auto"``, ``("gcs", host, port)`` for ``"host:port"``,
    ``("client", host, port)`` for ``"ray://host:port"``.

    Raises:
        ValueError: any other form (names the address and the accepted forms).
    """
    if address is None:
        return "process", None, None
    if not isinstance(address, str):
        raise TypeError(f"RayService: address must be a str or None, got {type(address).__name__}")
    if address == "auto":
        return "auto", None, None
    kind, rest = ("client", address[6:]) if address.startswith("ray://") else ("gcs", address)
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"RayService: address {address!r} is not None, 'auto', 'host:port' or "
            "'ray://host:port' (the head node's GCS address that `ray start --head` prints, "
            "e.g. '10.0.0.5:6379')"
        )
    return kind, host.strip("[]"), int(port)


# HTTP/2's client connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5):
# what a gRPC client sends first. A gRPC server (Ray's GCS, Ray Client) answers with its
# own SETTINGS frame: a 9-byte header of frame type 4 on stream 0.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 4
# A method every Ray GCS serves (any answer but UNIMPLEMENTED means it is one: Ray 2.x
# answers UNAUTHENTICATED to a client without its token, older ones OK).
_GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"


def probe(host: str, port: int, timeout_s: float, address: str, kind: str = "gcs") -> None:
    """Fail fast, before ``ray.init`` (which retries for a long time against anything that
    accepts a connection), unless a Ray server answers at ``host:port``, within
    ``timeout_s`` in all, whatever listens there:

    1. a TCP connection;
    2. the HTTP/2 handshake gRPC starts with: the server must answer the connection
       preface with a SETTINGS frame (an HTTP/1 server, a database, a silent or closing
       listener fail here);
    3. for a GCS address (``host:port``), when grpcio is installed (Ray depends on it):
       a call of a GCS method, which a gRPC server that is not Ray's answers with
       UNIMPLEMENTED.

    Raises:
        ValueError: any step fails or runs out of time (names the address, the step and
            the reason).
    """
    deadline = time.monotonic() + timeout_s

    def fail(reason: str) -> ValueError:
        return ValueError(
            f"RayService: no Ray cluster reachable at {address!r} ({reason}, checked within "
            f"{timeout_s:g} s); start one with `ray start --head --port={port}` on the head "
            "node, or pass address=None to start a local Ray"
        )

    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            _h2_handshake(sock, deadline)
    except (ConnectionResetError, ConnectionAbortedError):
        # A listener that accepts and resets at once: with a timeout, connect() polls and
        # reads SO_ERROR, so a reset that arrives first is connect()'s error, not a read's.
        raise fail("it closed the connection as it accepted it: not a Ray server") from None
    except OSError as e:
        reason = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise fail(reason) from None
    except _NotRay as e:
        raise fail(f"{e}: not a Ray server") from None
    if kind == "gcs":
        why = _not_a_gcs(host, port, deadline)
        if why is not None:
            raise fail(why)


class _NotRay(Exception):
    """What listens at an address is not a Ray server (the message says what it did)."""


def _h2_handshake(sock: socket.socket, deadline: float) -> None:
    """Send HTTP/2's preface; the reply must start with a SETTINGS frame (by ``deadline``)."""
    try:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        sock.sendall(_H2_PREFACE)
        head = _read_exactly(sock, 9, deadline)
    except ConnectionError:  # reset or closed while we wrote or read: a closing listener
        raise _NotRay("it closed the connection at gRPC's handshake") from None
    if head[3] != _H2_SETTINGS or int.from_bytes(head[5:9], "big") & 0x7FFFFFFF != 0:
        raise _NotRay(f"it answered gRPC's HTTP/2 handshake with {head!r}, not a SETTINGS frame")


def _read_exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    head = b""
    while len(head) < n:
        left = deadline - time.monotonic()
        part = None
        if left > 0:
            sock.settimeout(left)
            try:
                part = sock.recv(n - len(head))
            except TimeoutError:
                pass
        if part is None:
            raise _NotRay("it accepted the connection but did not answer gRPC's handshake")
        if not part:
            raise ConnectionResetError
        head += part
    return head


def _not_a_gcs(host: str, port: int, deadline: float) -> str | None:
    """Why the gRPC server at ``host:port`` is not a Ray GCS, or None (also when grpcio is
    not installed: then only the handshake was checked)."""
    try:
        import grpc
    except ImportError:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        return "timed out"
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        call = channel.unary_unary(_GCS_METHOD)
        try:
            call(b"", timeout=left)
        except grpc.RpcError as e:  # a grpc.Call: code() and details()
            code = e.code()
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return "a gRPC server that does not serve Ray's GCS methods"
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return "its gRPC server did not answer a GCS call in time"
            if code == grpc.StatusCode.UNAVAILABLE:
                return f"its gRPC server is unavailable: {e.details()}"
    return None


def _wait_for_cpus(ray: Any, want: float, timeout_s: float = 10.0) -> None:
    """Wait (bounded) until the killed workers' CPUs are free again, so a service started
    right after ``shutdown()`` finds them (Ray frees them as the processes exit)."""
    want = min(want, ray.cluster_resources().get("CPU", 0))
    end = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < want and time.monotonic() < end:
        time.sleep(0.05)


class RayService:
    """A preprocessing service on Ray (``distribute``'s ``service``): a dispatcher actor and
    ``num_workers`` worker actors that run the pipeline before ``distribute``.

    Args:
        num_workers: worker actors (each runs one split at a time; >= 1).
        address: None: this process's Ray if ``ray.init`` was called, else the cluster in
            ``RAY_ADDRESS``, else a new local Ray (``ray.init(num_cpus=max(cores,
            num_workers * num_cpus_per_worker), include_dashboard=False)``); ``"auto"``: the
            cluster ``ray start`` runs on this machine; ``"host:port"``: the head node's
            GCS address; ``"ray://host:port"``: Ray Client.
        num_cpus_per_worker: CPUs each worker actor declares (Ray schedules it where they
            are free; its pipeline's AUTOTUNE budget unless the pipeline sets one).
        name: the service's name: consumers in other processes (DDP ranks) that use the
            same name on the same cluster share its dispatcher, workers and jobs.
        split_size: pool positions per ``"distributed_epoch"`` split (indices of a
            random-access input, or files / row groups); None: one file per split, or
            ``ceil(n / (8 * num_workers))`` indices, raised towards 512 while every
            worker keeps two splits (at most 10,000).
        connect_timeout_s: how long an ``address`` may take, in all, to accept a
            connection and answer as a Ray server (gRPC's HTTP/2 handshake, then a GCS
            call: ``probe``) before ``ValueError`` (seconds, in (0, 60]).

    Raises:
        TypeError / ValueError: at once, for a bad argument. When a pipeline first runs:
            ``ValueError`` within about ``connect_timeout_s`` when no Ray server answers at
            ``address`` (nothing listens, or a service that is not Ray's),
            when the cluster has fewer free CPUs than the workers declare, or when a
            service of this name already runs with other settings; ``ImportError`` naming
            the extra (``pip install "datapipe-torch[ray]"``) without Ray.

    The service lives as long as the process that created its dispatcher (the first
    consumer, or ``start()``; it keeps the dispatcher's handle, and Ray ends an actor with
    its owner); ``shutdown()`` stops it earlier.

    Example:
        >>> import datapipe as dp
        >>> service = dp.service.RayService(num_workers=2)
        >>> service.num_workers, service.address
        (2, None)
    """

    def __init__(
        self,
        num_workers: int,
        address: str | None = None,
        num_cpus_per_worker: int = 1,
        name: str = "datapipe",
        split_size: int | None = None,
        connect_timeout_s: float = 1.0,
    ):
        self.num_workers = _check_int("num_workers", num_workers, 1)
        parse_address(address)
        self.address = address
        self.num_cpus_per_worker = _check_int("num_cpus_per_worker", num_cpus_per_worker, 1)
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"RayService: name must be 1-64 letters, digits, '_', '.' or '-', got {name!r}"
            )
        self.name = name
        self.split_size = None if split_size is None else _check_int("split_size", split_size, 1)
        if isinstance(connect_timeout_s, bool) or not isinstance(connect_timeout_s, (int, float)):
            raise TypeError("RayService: connect_timeout_s must be a number of seconds")
        if not 0 < connect_timeout_s <= 60:
            raise ValueError(
                f"RayService: connect_timeout_s must be in (0, 60], got {connect_timeout_s}"
            )
        self.connect_timeout_s = float(connect_timeout_s)

    def __repr__(self) -> str:
        return (
            f"RayService(num_workers={self.num_workers}, address={self.address!r}, "
            f"num_cpus_per_worker={self.num_cpus_per_worker}, name={self.name!r})"
        )

    @property
    def config(self) -> dict:
        return {
            "num_workers": self.num_workers,
            "num_cpus_per_worker": self.num_cpus_per_worker,
            "name": self.name,
        }

    # ---- connecting --------------------------------------------------------------------------
    def _ray(self) -> Any:
        loaded = sys.modules.get("ray")
        if loaded is None or not loaded.is_initialized():
            target = self._target()  # probed before importing Ray (seconds) or joining it
        try:
            import ray
        except ImportError as e:
            raise ImportError(
                'datapipe.service.RayService needs Ray: pip install "datapipe-torch[ray]"'
            ) from e
        if not ray.is_initialized():
            self._init(ray, *target)
        elif self.address not in (None, "auto"):
            self._check_same_cluster(ray)
        return ray

    def _target(self) -> tuple[str, str | None]:
        """``(kind, address)`` to join (``RAY_ADDRESS`` when ``address`` is None), after
        checking that something listens there (``probe``)."""
        kind, host, port = parse_address(self.address)
        target = self.address
        env = os.environ.get("RAY_ADDRESS")
        if kind == "process" and env:
            (kind, host, port), target = parse_address(env), env
        if kind in ("gcs", "client"):
            assert host is not None and port is not None and target is not None  # parsed so
            probe(host, port, self.connect_timeout_s, target, kind)
        return kind, target

    def _init(self, ray: Any, kind: str, target: str | None) -> None:
        if kind in ("gcs", "client"):
            ray.init(address=target)
        elif kind == "auto":
            try:
                ray.init(address="auto")
            except ConnectionError as e:
                raise ValueError(
                    f"RayService: address='auto' found no Ray cluster on this machine ({e}); "
                    "start one with `ray start --head`"
                ) from None
        else:
            cores = os.cpu_count() or 1
            need = self.num_workers * self.num_cpus_per_worker
            ray.init(address="local", num_cpus=max(cores, need), include_dashboard=False)

    def _check_same_cluster(self, ray: Any) -> None:
        kind, host, port = parse_address(self.address)
        now = ray.get_runtime_context().gcs_address
        if kind == "gcs" and now.rpartition(":")[2] != str(port):
            raise ValueError(
                f"RayService: Ray is already initialised in this process (cluster {now}); "
                f"address={self.address!r} is another one (call ray.shutdown() first)"
            )

    def _dispatcher(self) -> Any:
        ray = self._ray()
        # by Ray session too: a handle of an earlier ray.init() is of no use
        key = (self.name, ray.get_runtime_context().get_job_id())
        handle = _HANDLES.get(key)
        if handle is not None:
            return handle
        from datapipe.service.actors import NAMESPACE, Dispatcher

        actor_name = f"datapipe-service-{self.name}"
        try:
            handle = ray.get_actor(actor_name, namespace=NAMESPACE)
        except ValueError:  # no such actor yet: create it (another process may race us)
            self._check_resources(ray)
            handle = Dispatcher.options(  # type: ignore[attr-defined]  # added by @ray.remote
                name=actor_name, namespace=NAMESPACE, get_if_exists=True
            ).remote(self.config)
        config = ray.get(handle.get_config.remote())
        if config != self.config:
            raise ValueError(
                f"RayService: a service named {self.name!r} already runs on this cluster "
                f"with {config}; this one asks for {self.config} (use another name, or "
                "the same settings)"
            )
        _HANDLES[key] = handle
        return handle

    def _check_resources(self, ray: Any) -> None:
        need = self.num_workers * self.num_cpus_per_worker
        free = ray.available_resources().get("CPU", 0)
        if free < need:
            total = ray.cluster_resources().get("CPU", 0)
            raise ValueError(
                f"RayService: {self.num_workers} workers x {self.num_cpus_per_worker} CPUs need "
                f"{need} free CPUs, but the cluster has {free:g} free of {total:g} (add nodes "
                "with `ray start --address=...`, or ask for fewer workers)"
            )

    # ---- public ------------------------------------------------------------------------------
    def start(self) -> RayService:
        """Join or start Ray and the service now (else the first pipeline run does)."""
        self._dispatcher()
        return self

    def workers(self) -> list:
        """The worker actors' handles, by slot (e.g. for ``ray.kill`` in a fault test)."""
        ray = self._ray()
        return ray.get(self._dispatcher().handles.remote())

    def stats(self) -> dict:
        """Counters of the dispatcher (splits assigned, done, released, resumed; workers
        replaced; jobs) and of each worker (replies, elements, seconds computing and
        opening split chains)."""
        ray = self._ray()
        return ray.get(self._dispatcher().stats.remote())

    def shutdown(self) -> None:
        """Stop the dispatcher and the workers (jobs in progress end with an error)."""
        try:
            import ray
        except ImportError:
            return
        if not ray.is_initialized():
            _HANDLES.clear()
            return
        from datapipe.service.actors import NAMESPACE

        cached = [k for k in _HANDLES if k[0] == self.name]
        handle = _HANDLES.get(cached[-1]) if cached else None
        if handle is None:
            try:
                handle = ray.get_actor(f"datapipe-service-{self.name}", namespace=NAMESPACE)
            except ValueError:
                return
        free = ray.available_resources().get("CPU", 0)
        try:
            config = ray.get(handle.get_config.remote(), timeout=30)
            ray.get(handle.shutdown.remote(), timeout=30)
            ray.kill(handle)
        finally:  # (only now: the owner's last handle going away ends the actor)
            for key in cached:
                del _HANDLES[key]
        _wait_for_cpus(ray, free + config["num_workers"] * config["num_cpus_per_worker"])
