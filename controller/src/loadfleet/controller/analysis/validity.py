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
| open-model mean send lag against the mean latency, connections free | ≥ 5 % | ≥ 10 % |

Send lag counts only while connections were free (no request dropped for want of one and
fewer connections open than the engines may open): when the targets hold every connection
the lag is theirs, the system's limit, not the generator's.

An open model measures latency from when a request was due, so a request the generator
sent late carries its lag in its latency. The lag of a few late sends is the first rule's;
the second weighs the mean lag (IntervalStats.send_lag_sum_us over the requests sent,
scheduled - not_sent) against the mean latency: on a sub-millisecond service 0.79 ms of a
0.94 ms mean was the generator's own scheduling with no send 10 ms late, and the figures
measured the generator. A driver that does not measure the sum (Gatling) sends 0: not judged.

A target that failed is not a generator's limit (`FailureTally`): when fewer than 1 % of an
interval's requests got an ok response and at least 90 % of its failures are of a target-side
kind (connect refused, connect timeout, timeout, reset, protocol), the interval measures the
target's failure. Its generators are then not judged: engines busy sending requests that
fail at once (a refused connect costs a few microseconds) measure nothing about the target,
and more agents would only fail faster. It is `suspect` for that one reason, which names the
failures and the targets ("the target failed: 2,037,912 connects refused by 127.0.0.2:18081"):
not `invalid`, whose figures are left out (the knee, the USL fit, thresholds), because a
failing target's figures are the truth about it.

The worst signal wins. A verdict is a small frozen value; its reasons are typed (`Signal`)
and carry the agent and a short text, so outputs can count them or print them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from loadfleet.controller.model.health import Health
from loadfleet.controller.model.verdict import Reason, Signal, Validity
from loadfleet.v1 import stats_pb2
from loadfleet.wire.histogram import summaries
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
# The mean send lag as a share of the mean latency (of the same agent's interval).
LAG_OF_LATENCY_SUSPECT, LAG_OF_LATENCY_INVALID = 0.05, 0.10
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
            f"{h.local_ports_used} TCP sockets on the host, {h.local_port_range} ephemeral ports per destination",
        )
    return tuple(out)


_LOCAL_KINDS = (
    (stats_pb2.ERROR_KIND_LOCAL_PORTS, "no ephemeral port"),
    (stats_pb2.ERROR_KIND_LOCAL_FDS, "no file descriptor"),
)


def row_reasons(
    agent: str, total: StatsRow, connections_free: bool, mean_latency_us: float = 0.0
) -> tuple[Reason, ...]:
    """What one agent's interval total says: connects it failed by itself, and (open model)
    requests it sent late while `connections_free`, and how much of `mean_latency_us` (its
    responses' mean latency; 0: none) their mean lag was."""
    out: list[Reason] = []
    if connections_free and (lagged := lag_of_latency(agent, total, mean_latency_us)):
        out.append(lagged)
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


def lag_of_latency(agent: str, total: StatsRow, mean_latency_us: float) -> Reason | None:
    """The mean send lag of an agent's interval weighed against its mean latency: "send lag
    0.79 ms is 84 % of the 0.94 ms mean latency". None below LAG_OF_LATENCY_SUSPECT, or when
    nothing was measured (no sum, no request sent, no latency)."""
    sent = total.scheduled - total.not_sent
    if not total.send_lag_sum_us or sent <= 0 or mean_latency_us <= 0:
        return None
    lag_us = total.send_lag_sum_us / sent
    share = lag_us / mean_latency_us
    if share < LAG_OF_LATENCY_SUSPECT:
        return None
    validity = Validity.INVALID if share >= LAG_OF_LATENCY_INVALID else Validity.SUSPECT
    text = f"send lag {lag_us / 1000:.2f} ms is {share * 100:.0f} % of the {mean_latency_us / 1000:.2f} ms mean latency"
    return Reason(Signal.SEND_LAG_SHARE, validity, agent, text)


def mean_latencies_us(rows: list[StatsRow]) -> list[float]:
    """Each row's mean latency (µs; 0.0 without a response), in one native pass over the
    histograms of them all (histogram.summaries): a thousand agents a second."""
    filled = [i for i, row in enumerate(rows) if row.histogram]
    means = [0.0] * len(rows)
    if filled:
        for i, mean in zip(filled, summaries([rows[i].histogram for i in filled], ()).mean.tolist()):
            means[i] = mean
    return means


def connections_free(total: StatsRow, cap: int) -> bool:
    """Whether the engines had a connection to spare: nothing dropped for want of one, and
    fewer open than `cap` (0: unknown, the drops alone decide)."""
    return total.not_sent == 0 and (not cap or total.active_connections < cap)


# ---- A target that failed (the module's docstring): both shares are of one interval's, or one
# step's, requests over every target.
TARGET_FAILED_OK_SHARE = 0.01  # ok responses below this share of the requests ...
TARGET_FAILED_SIDE_SHARE = 0.9  # ... and failures of a target-side kind at least this share of the failures
# The target-side kinds (stats.proto's ErrorKind), as a finding counts them: one, several.
_TARGET_SIDE: dict[int, tuple[str, str]] = {
    stats_pb2.ERROR_KIND_CONNECT_REFUSED: ("connect refused", "connects refused"),
    stats_pb2.ERROR_KIND_CONNECT_TIMEOUT: ("connect timed out", "connects timed out"),
    stats_pb2.ERROR_KIND_TIMEOUT: ("request timed out", "requests timed out"),
    stats_pb2.ERROR_KIND_RESET: ("connection reset", "connections reset"),
    stats_pb2.ERROR_KIND_PROTOCOL: ("response not HTTP/1.1", "responses not HTTP/1.1"),
}
# Targets a finding names, the most failed first; a larger fleet of targets gets a count of the rest.
MAX_TARGETS_NAMED = 5


@dataclass
class FailureTally:
    """What says whether requests failed on the targets' side, summed over rows: requests,
    ok responses, failures (transport errors and 4xx/5xx), and the failures of each
    target-side kind per target. O(targets × 5), however many rows it adds."""

    requests: int = 0
    ok: int = 0
    failed: int = 0
    by_target: dict[str, dict[int, int]] = field(default_factory=dict)  # target -> kind -> failures

    @classmethod
    def of(cls, rows: Iterable[StatsRow]) -> FailureTally:
        tally = cls()
        for row in rows:
            tally.add(row)
        return tally

    def add(self, row: StatsRow) -> None:
        self.requests += row.requests
        self.ok += row.ok
        self.failed += row.failed
        for kind, n in row.errors.items():
            if n and kind in _TARGET_SIDE:
                kinds = self.by_target.setdefault(row.target, {})
                kinds[kind] = kinds.get(kind, 0) + n

    def merge(self, other: FailureTally) -> None:
        self.requests += other.requests
        self.ok += other.ok
        self.failed += other.failed
        for target, kinds in other.by_target.items():
            into = self.by_target.setdefault(target, {})
            for kind, n in kinds.items():
                into[kind] = into.get(kind, 0) + n

    @property
    def target_side(self) -> int:
        return sum(n for kinds in self.by_target.values() for n in kinds.values())

    @property
    def target_failed(self) -> bool:
        """The rule: fewer than 1 % ok, and at least 90 % of the failures the target's."""
        return (
            self.requests > 0
            and self.ok < TARGET_FAILED_OK_SHARE * self.requests
            and self.failed > 0
            and self.target_side >= TARGET_FAILED_SIDE_SHARE * self.failed
        )

    def describe(self) -> str:
        """`the target failed: 2,037,912 connects refused by 127.0.0.2:18081`; with several
        targets, each with its failures, the most failed first."""
        ranked = sorted(self.by_target.items(), key=lambda tk: (-sum(tk[1].values()), tk[0]))
        parts = [_target_failures(target, kinds) for target, kinds in ranked[:MAX_TARGETS_NAMED]]
        if len(ranked) > MAX_TARGETS_NAMED:
            parts.append(f"and {len(ranked) - MAX_TARGETS_NAMED} more targets")
        return ("the targets failed: " if len(ranked) > 1 else "the target failed: ") + "; ".join(parts)

    def reason(self) -> Reason:
        """The one reason of an interval (or step) whose target failed: no agent's doing."""
        return Reason(Signal.TARGET_FAILED, Validity.SUSPECT, "", self.describe())


def _target_failures(target: str, kinds: dict[int, int]) -> str:
    counts = ", ".join(
        f"{n:,} {_TARGET_SIDE[kind][n != 1]}" for kind, n in sorted(kinds.items(), key=lambda kn: (-kn[1], kn[0]))
    )
    return f"{counts} by {address(target)}"


def address(url: str) -> str:
    """A target's address as a person names it: `http://127.0.0.2:18081/` -> `127.0.0.2:18081`
    (no scheme, no user, no path)."""
    return urlsplit(url).netloc.rpartition("@")[2] or url
