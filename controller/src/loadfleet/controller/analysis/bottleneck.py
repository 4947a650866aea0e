"""The bottleneck of a step: the saturated resource its monitored hosts show, named.

A knee says that throughput stopped growing; the monitors can say why. From a step's host
loads (hosts.py: means over its measured window), the first of these that holds, in this
order (the most specific cause first):

1. a server's processes at their CPU cap: CPU ≥ SATURATED_SHARE of what they may use (the
   cap the monitor reports — their quota or their CPUs — else the host's cores);
2. a server at its connection limit: HAProxy's sessions (`scur`) ≥ SATURATED_SHARE of
   its limit (`slim`);
3. a balancer's queue: HAProxy's `qcur` of a backend at least QUEUE_MIN_REQUESTS on
   average (requests wait for want of a free server);
4. a host with every core busy: its CPU ≥ SATURATED_SHARE (a host shared with the load
   generators or other servers shows that too: the sentence names the host, not a server).

Without monitors, or below every bound, there is no claim (None): a guess would be worse
than saying nothing. When several processes or hosts qualify, the one closest to its cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from loadfleet.controller.model.hostsamples import Bottleneck, HostLoad, Resource

# Busy at this share of a cap counts as the cap: sampling a saturated process over a
# heartbeat reads a few percent under its quota (the scheduler's accounting, the period's edges).
SATURATED_SHARE = 0.95
# A queue's mean length over the step from which it counts: requests waiting in at least half
# of the samples, or a longer queue in fewer (qcur is read once a heartbeat).
QUEUE_MIN_REQUESTS = 0.5


def find_bottleneck(hosts: Iterable[HostLoad]) -> Bottleneck | None:
    """The step's saturated resource (see the module's rules), or None."""
    hosts = tuple(hosts)
    for found in (_processes(hosts), _connections(hosts), _queues(hosts), _host_cpus(hosts)):
        ranked = sorted(found, key=_closeness, reverse=True)
        if ranked:
            return ranked[0]
    return None


def _closeness(b: Bottleneck) -> float:
    return b.used / b.limit if b.limit else b.used


def _processes(hosts: tuple[HostLoad, ...]) -> Iterator[Bottleneck]:
    for h in hosts:
        for p in h.processes:
            if p.cap_pct > 0 and p.cpu_pct >= SATURATED_SHARE * p.cap_pct:
                yield Bottleneck(Resource.PROCESS_CPU, h.host, p.name, p.cpu_pct, p.cap_pct)


def _haproxy_rows(h: HostLoad, field: str) -> Iterator[tuple[str, float]]:
    """(haproxy.<proxy>.<server>, value) of each gauge `field` the host's HAProxy reported."""
    for name, value in h.gauges.items():
        prefix, _, last = name.rpartition(".")
        if last == field and prefix.startswith("haproxy."):
            yield prefix, value


def _connections(hosts: tuple[HostLoad, ...]) -> Iterator[Bottleneck]:
    for h in hosts:
        for row, limit in _haproxy_rows(h, "slim"):
            used = h.gauges.get(f"{row}.scur", 0.0)
            if limit > 0 and used >= SATURATED_SHARE * limit:
                yield Bottleneck(Resource.CONNECTIONS, h.host, _haproxy_name(row), used, limit)


def _queues(hosts: tuple[HostLoad, ...]) -> Iterator[Bottleneck]:
    for h in hosts:
        for row, queued in _haproxy_rows(h, "qcur"):
            if row.endswith(".BACKEND") and queued >= QUEUE_MIN_REQUESTS:
                yield Bottleneck(Resource.BACKEND_QUEUE, h.host, _haproxy_name(row), queued, 0.0)


def _host_cpus(hosts: tuple[HostLoad, ...]) -> Iterator[Bottleneck]:
    for h in hosts:
        if h.cpu_pct >= SATURATED_SHARE * 100:
            cores = max(1, h.cores)
            yield Bottleneck(Resource.HOST_CPU, h.host, h.host, h.cpu_pct * cores, 100.0 * cores)


def _haproxy_name(row: str) -> str:
    """haproxy.<proxy>.<server> as a reader says it: "HAProxy backend group", "HAProxy lb/web1"."""
    _, proxy, server = row.split(".", 2)
    if server in ("BACKEND", "FRONTEND"):
        return f"HAProxy {server.lower()} {proxy}"
    return f"HAProxy {proxy}/{server}"
