"""Whether an interval's figures measure the targets or the load generators: a verdict
(`valid`, `suspect`, `invalid`) with its reasons.

Signals come from two places. Each agent heartbeat (agent.proto's Health) carries its
host's CPU, its event-loop lag, its busiest engine's CPU and CPU wait (the time the engine
was ready to run but had no CPU), its engines' file descriptors against their limit and
its ephemeral ports against their range. Each interval's rows carry the connects the
generator failed by itself (error kinds LOCAL_PORTS, LOCAL_FDS) and, for the open model,
how late requests were sent.

| signal | suspect | invalid |
|---|---|---|
| host CPU (the agent's cores) | ≥ 90 % | never alone: a busy neighbour slows an engine only through its wait |
| busiest engine's CPU | | ≥ 90 % of its core |
| busiest engine's CPU wait | ≥ 10 % of a core | ≥ 25 %, or ≥ 10 % with CPU + wait ≥ 90 % (it wanted a core and did not get it) |
| engines' CPU, older agents without the two above | | ≥ 90 % × engines |
| agent event-loop lag | ≥ 250 ms | ≥ 1,000 ms |
| file descriptors | ≥ 90 % of RLIMIT_NOFILE | connects failed with LOCAL_FDS in ≥ 1 % of requests (suspect below) |
| ephemeral ports | ≥ 80 % of the range toward one destination | connects failed with LOCAL_PORTS in ≥ 1 % of requests (suspect below) |
| open-model send lag while connections were free | ≥ 1 % sent late and a lag ≥ 10 ms | ≥ 10 % sent late and a lag ≥ 100 ms |

Send lag counts only while connections were free (no request dropped for want of one and
fewer connections open than the engines may open): when the targets hold every connection
the lag is theirs, the system's limit, not the generator's.

The worst signal wins. A verdict is a small frozen value; its reasons are typed (`Signal`)
and carry the agent and a short text, so outputs can count them or print them.
"""

from __future__ import annotations

from dataclasses import replace

from loadfleet.controller.model.health import Health
from loadfleet.controller.model.verdict import Reason, Signal, Validity
from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import StatsRow

HOST_CPU_SUSPECT_PCT = 90.0
ENGINE_CPU_INVALID_PCT = 90.0  # of one core
ENGINE_WAIT_SUSPECT_PCT = 10.0
ENGINE_WAIT_INVALID_PCT = 25.0
LOOP_LAG_SUSPECT_MS = 250.0
LOOP_LAG_INVALID_MS = 1000.0
FDS_SUSPECT_SHARE = 0.9
PORTS_SUSPECT_SHARE = 0.8
LOCAL_ERRORS_INVALID_SHARE = 0.01
LATE_SUSPECT_SHARE, LATE_SUSPECT_LAG_MS = 0.01, 10.0
LATE_INVALID_SHARE, LATE_INVALID_LAG_MS = 0.10, 100.0
# Connections an engine may open in the open model when the plan does not say
# (DEFAULT_MAX_CONNECTIONS in agent/engine/src/load.rs).
ENGINE_DEFAULT_MAX_CONNECTIONS = 1024


def health_reasons(agent: str, h: Health, engines: int, *, multi_core_driver: bool = False) -> tuple[Reason, ...]:
    """What one heartbeat says about its agent's engines. `multi_core_driver`: the agent
    runs one multi-threaded driver over its `engines` cores (Gatling's JVM), whose CPU and
    wait are then judged per core."""
    out: list[Reason] = []
    if multi_core_driver and engines > 1:
        wait_all = h.busiest_engine_wait_pct
        h = replace(
            h,
            busiest_engine_cpu_pct=h.busiest_engine_cpu_pct / engines,
            busiest_engine_wait_pct=None if wait_all is None else wait_all / engines,
        )

    def add(signal: Signal, validity: Validity, text: str) -> None:
        out.append(Reason(signal, validity, agent, text))

    if h.cpu_pct >= HOST_CPU_SUSPECT_PCT:
        add(Signal.HOST_CPU, Validity.SUSPECT, f"host CPU {h.cpu_pct:.0f} %")
    wait = h.busiest_engine_wait_pct
    if h.busiest_engine_cpu_pct >= ENGINE_CPU_INVALID_PCT:
        add(Signal.ENGINE_CPU, Validity.INVALID, f"engine at {h.busiest_engine_cpu_pct:.0f} % of its core")
    elif (
        wait is None
        and engines
        and h.busiest_engine_cpu_pct == 0
        and h.engine_cpu_pct >= ENGINE_CPU_INVALID_PCT * engines
    ):
        add(Signal.ENGINE_CPU, Validity.INVALID, f"engines at {h.engine_cpu_pct:.0f} % of {engines} core(s)")
    if wait is not None and wait >= ENGINE_WAIT_SUSPECT_PCT:
        starved = wait >= ENGINE_WAIT_INVALID_PCT or h.busiest_engine_cpu_pct + wait >= ENGINE_CPU_INVALID_PCT
        add(
            Signal.ENGINE_WAIT,
            Validity.INVALID if starved else Validity.SUSPECT,
            f"engine waited {wait:.0f} % of a core for a CPU (ran {h.busiest_engine_cpu_pct:.0f} %)",
        )
    if h.loop_lag_ms >= LOOP_LAG_SUSPECT_MS:
        add(
            Signal.LOOP_LAG,
            Validity.INVALID if h.loop_lag_ms >= LOOP_LAG_INVALID_MS else Validity.SUSPECT,
            f"event loop {h.loop_lag_ms:.0f} ms late",
        )
    if h.engine_fd_limit and h.engine_fds >= FDS_SUSPECT_SHARE * h.engine_fd_limit:
        add(Signal.FDS, Validity.SUSPECT, f"engine holds {h.engine_fds} of {h.engine_fd_limit} file descriptors")
    if h.local_port_range and h.local_ports_used >= PORTS_SUSPECT_SHARE * h.local_port_range:
        add(
            Signal.PORTS,
            Validity.SUSPECT,
            f"{h.local_ports_used} of {h.local_port_range} ephemeral ports in use toward one destination",
        )
    return tuple(out)


_LOCAL_KINDS = (
    (stats_pb2.ERROR_KIND_LOCAL_PORTS, "no ephemeral port"),
    (stats_pb2.ERROR_KIND_LOCAL_FDS, "no file descriptor"),
)


def row_reasons(agent: str, total: StatsRow, connections_free: bool) -> tuple[Reason, ...]:
    """What one agent's interval total says: connects it failed by itself, and (open model)
    requests it sent late while `connections_free`."""
    out: list[Reason] = []
    for kind, what in _LOCAL_KINDS:
        n = total.errors.get(kind, 0)
        if n:
            share = n / max(1, total.requests)
            validity = Validity.INVALID if share >= LOCAL_ERRORS_INVALID_SHARE else Validity.SUSPECT
            out.append(
                Reason(
                    Signal.LOCAL_ERRORS, validity, agent, f"{n} connect(s) failed with {what} ({share:.1%} of requests)"
                )
            )
    if total.scheduled and connections_free:
        late = total.sent_late / total.scheduled
        lag_ms = total.max_send_lag_us / 1000
        validity = (
            Validity.INVALID
            if late >= LATE_INVALID_SHARE and lag_ms >= LATE_INVALID_LAG_MS
            else Validity.SUSPECT
            if late >= LATE_SUSPECT_SHARE and lag_ms >= LATE_SUSPECT_LAG_MS
            else Validity.VALID
        )
        if validity is not Validity.VALID:
            out.append(
                Reason(
                    Signal.SEND_LAG,
                    validity,
                    agent,
                    f"{late:.0%} of requests sent late (up to {lag_ms:.0f} ms) while connections were free",
                )
            )
    return tuple(out)


def connections_free(total: StatsRow, cap: int) -> bool:
    """Whether the engines had a connection to spare: nothing dropped for want of one, and
    fewer open than `cap` (0: unknown, the drops alone decide)."""
    return total.not_sent == 0 and (not cap or total.active_connections < cap)
