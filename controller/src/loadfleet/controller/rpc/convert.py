"""Protobuf -> controller dataclasses on the agents' side (AgentService): what agents say;
jobconvert.py builds what they are told (a job), runconvert.py is the operators' side
(RunService). They are the only modules of the controller that read or build protobuf
messages besides the servicers' plumbing.

An agent's message is checked here as it enters (bounds.py): a Hello or a report past a
bound is refused (BadHello, BadReport), every text is made printable and cut, a heartbeat's
figures that are no number are left unset. What goes out cannot fail on a figure that grew
too large: counts saturate at their field's range."""

from __future__ import annotations

import math
from dataclasses import asdict

from loadfleet.controller.fleet.agents import AgentIdentity, ClockOffset
from loadfleet.controller.fleet.jobs import EngineFailure, JobReport, JobState, ReportLimits
from loadfleet.controller.fleet.spooldrops import AgentSpoolDrop
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo, ProcessSample
from loadfleet.controller.plan.scenarios import MAX_SCENARIOS
from loadfleet.controller.rpc import bounds
from loadfleet.v1 import agent_pb2, stats_pb2
from loadfleet.wire.checks import MAX_CHECKS_PER_ROW, names_problem
from loadfleet.wire.histogram import EMPTY, HistogramError, decode_buckets
from loadfleet.wire.stats import MAX_ERROR_SAMPLES, TOTAL, StatsRow, total_row
from loadfleet.wire.text import printable


class BadHello(ValueError):
    """A Hello past the bounds of what an agent may claim (bounds.py); its session is
    refused with INVALID_ARGUMENT and this message."""


def identity_from_hello(hello: agent_pb2.Hello) -> AgentIdentity:
    """The agent's identity, its texts printable; BadHello (every problem at once) when the
    Hello claims more than the controller will ever use."""
    problems = bounds.hello_problems(hello)
    if problems:
        raise BadHello("; ".join(problems))
    name, path = bounds.MAX_NAME_CHARS, bounds.MAX_PATH_CHARS
    return AgentIdentity(
        agent_id=hello.agent_id,
        hostname=printable(hello.hostname, name),
        cores=max(1, hello.cores),
        version=printable(hello.version, name),
        capabilities=tuple(printable(c, name) for c in hello.capabilities),
        labels=tuple(sorted((printable(k, name), printable(v, name)) for k, v in hello.labels.items())),
        monitor=MonitorInfo(
            targets=tuple(printable(t, name) for t in hello.monitor.targets),
            role=printable(hello.monitor.role, name),
            processes=tuple(printable(p, name) for p in hello.monitor.processes),
        )
        if hello.HasField("monitor")
        else None,
        allow_targets=tuple(printable(t, name) for t in hello.allow_targets),
        gatling_root=printable(hello.gatling_root, path),
    )


def clock_from_proto(beat: agent_pb2.Heartbeat) -> ClockOffset | None:
    """The agent's clock estimate; None without one, or with an offset no clock has."""
    if not beat.HasField("clock") or abs(beat.clock.offset_ms) > bounds.MAX_CLOCK_OFFSET_MS:
        return None
    return ClockOffset(beat.clock.offset_ms, beat.clock.rtt_ms)


def host_from_proto(beat: agent_pb2.Heartbeat, clock: ClockOffset | None) -> HostSample | None:
    """The host's figures, stamped in the controller's clock. Its lists are cut to their
    bounds before they are read (the first processes and counters are kept), a counter that
    is no number is left out, any other figure that is no number is 0, and so is a process
    cap past its bound (unknown). None: no sample, or one stamped outside any clock's range."""
    if not beat.HasField("host"):
        return None
    h = beat.host
    at_ms = beat.sent_at_ms + (clock.offset_ms if clock else 0)
    if not 0 < at_ms <= bounds.MAX_TIME_MS:
        return None
    name, finite = bounds.MAX_NAME_CHARS, bounds.finite
    return HostSample(
        at_ms=at_ms,
        cores=h.cores,
        cpu_pct=finite(h.cpu_pct),
        mem_used_pct=finite(h.mem_used_pct),
        net_rx_bytes_per_s=finite(h.net_rx_bytes_per_s),
        net_tx_bytes_per_s=finite(h.net_tx_bytes_per_s),
        tcp_established=h.tcp_established,
        processes=tuple(
            ProcessSample(
                printable(p.name, name), p.count, finite(p.cpu_pct), finite(p.rss_mb), bounds.process_cap(p.cap_pct)
            )
            for p in h.processes[: bounds.MAX_HOST_PROCESSES]
        ),
        counters={
            printable(c.name, name): c.value for c in h.counters[: bounds.MAX_HOST_COUNTERS] if math.isfinite(c.value)
        },
    )


def health_from_proto(pb: agent_pb2.Health) -> Health:
    """The agent's health; a figure that is no number (NaN, infinity) is left unset."""
    finite = bounds.finite
    wait = pb.busiest_engine_wait_pct if pb.HasField("busiest_engine_wait_pct") else None
    return Health(
        cpu_pct=finite(pb.cpu_pct),
        engine_cpu_pct=finite(pb.engine_cpu_pct),
        rss_mb=finite(pb.rss_mb),
        loop_lag_ms=finite(pb.loop_lag_ms),
        mem_used_pct=finite(pb.mem_used_pct),
        busiest_engine_cpu_pct=finite(pb.busiest_engine_cpu_pct),
        busiest_engine_wait_pct=wait if wait is not None and math.isfinite(wait) else None,
        engine_fds=pb.engine_fds,
        engine_fd_limit=pb.engine_fd_limit,
        local_ports_used=pb.local_ports_used,
        local_port_range=pb.local_port_range,
    )


def spool_drop_from_proto(pb: agent_pb2.SpoolDrop) -> AgentSpoolDrop:
    """What an agent dropped: its texts printable, its counts at most bounds.MAX_TOTAL."""
    most = bounds.MAX_TOTAL
    return AgentSpoolDrop(
        job_id=printable(pb.job_id, bounds.MAX_ID_CHARS),
        messages=min(pb.messages, most),
        reports=min(pb.reports, most),
        requests=min(pb.requests, most),
        first_interval_ms=pb.first_interval_ms,
        last_interval_ms=pb.last_interval_ms,
        cause=printable(pb.cause, bounds.MAX_TEXT_CHARS),
    )


def job_status_from_proto(pb: agent_pb2.JobStatus) -> tuple[str, JobState, str] | None:
    """(job id, state, message) of a job's status, its texts printable; None for a state
    this controller does not know (proto3 enums are open): such a status is ignored."""
    state = _JOB_STATES.get(pb.state)
    if state is None:
        return None
    return printable(pb.job_id, bounds.MAX_ID_CHARS), state, printable(pb.message, bounds.MAX_TEXT_CHARS)


def health_to_proto(h: Health) -> agent_pb2.Health:
    """Health's fields are the message's; a wait of None leaves it unset."""
    return agent_pb2.Health(**asdict(h))


class BadReport(ValueError):
    """An agent's report that its job cannot hold; refused before it costs anything."""


def report_from_proto(
    agent_id: str, seq: int, pb: agent_pb2.AgentInterval, limits: ReportLimits, *, counts_only: bool = False
) -> JobReport:
    """The report decoded, once its shape is checked against `limits` (the number of rows
    before any row is read, then names and histogram sizes, so a hostile report costs no
    decoding), and its counts and error kinds against what an interval can hold
    (bounds.row_problem). The agent's `*`/`*` row becomes the report's total (computed here
    when an agent did not send one). Its error samples: the first MAX_ERROR_SAMPLES, printable.

    `counts_only`: the report's interval is closed, so it is counted as late or dropped as a
    resend, never merged: its histograms are not decoded (most of the cost of a report, and
    what a controller catching up after falling behind has least time for)."""
    report = pb.report
    if len(report.stats) > limits.max_rows:  # before a single row becomes an object
        raise BadReport(f"{len(report.stats):,} rows, more than the job's {limits.max_rows:,}")
    # Each row's message and bytes fields are read once: every read of a field makes a new
    # object (upb), and a thousand agents' reports a second make that a tenth of the cost.
    stats = list(report.stats)
    rows = _decoded_rows(stats, limits, counts_only=counts_only)
    for row in rows:
        if problem := bounds.row_problem(row):
            raise BadReport(problem)
    totals = [r for r in rows if (r.target, r.request) == (TOTAL, TOTAL)]
    parts = tuple(r for r in rows if (r.target, r.request) != (TOTAL, TOTAL))
    total = totals[0] if totals else total_row(parts)
    if len(totals) > 1 or total.requests != sum(r.requests for r in parts):
        raise BadReport("its total row does not add up to its rows")
    if problem := _checks_problem(rows, parts, total):
        raise BadReport(problem)
    return JobReport(
        job_id=pb.job_id,
        agent_id=agent_id,
        seq=seq,
        interval_start_ms=report.interval_start_ms,
        rows=parts,
        total=total,
        final=report.final,
        error_samples=tuple(_sample_text(s) for s in report.error_samples[:MAX_ERROR_SAMPLES]),
    )


def _sample_text(s: stats_pb2.ErrorSample) -> str:
    """An error sample on one printable line; a failed check's names the check."""
    check = f"{s.check}: " if s.kind == stats_pb2.ERROR_KIND_CHECK and s.check else ""
    return printable(f"{s.target} {s.request}: {check}{s.message}", bounds.MAX_TEXT_CHARS)


def _checks_problem(rows: list[StatsRow], parts: tuple[StatsRow, ...], total: StatsRow) -> str | None:
    """What is impossible about the rows' checks (their names were bounded before decoding:
    _check_names_problem): a count past what an interval could hold, more responses that
    failed a check than responses, a failed check counted as a transport error (it is a
    response: ERROR_KIND_CHECK is for samples only), or a total naming a check no row has."""
    for row in rows:
        where = f"the row ({row.target!r}, {row.request!r})"
        counts = [row.reported_check_failed, row.users_stopped, row.sessions_restarted, row.redirects]
        counts += [n for c in row.checks.values() for n in (c.passed, c.failed)]
        if max(counts) > bounds.MAX_COUNT:
            return f"{where} counts {max(counts):,} in its checks, more than one interval can hold"
        if row.check_failed > row.responses:
            return f"{where} has {row.check_failed:,} responses that failed a check of its {row.responses:,}"
        if row.errors.get(stats_pb2.ERROR_KIND_CHECK):
            return f"{where} counts failed checks as errors (they are responses: check_failed)"
    named = {name for row in parts for name in row.checks}
    if unknown := [name for name in total.checks if name not in named]:
        return f"its total row names a check none of its rows has: {unknown[0]!r}"
    return None


def _decoded_rows(stats: list[stats_pb2.IntervalStats], limits: ReportLimits, *, counts_only: bool) -> list[StatsRow]:
    """The rows, once every row's names and histogram sizes are within `limits`: with their
    histograms decoded (all at once in the agent's form, else row by row), or none decoded."""
    latency, waiting, any_v2 = [], [], False
    for s in stats:
        if problem := _names_problem(s, limits):
            raise BadReport(problem)
        latency_v2, waiting_v2 = s.latency_histogram, s.waiting_histogram
        latency.append(s.latency_buckets)
        waiting.append(s.waiting_buckets)
        for size in (len(latency[-1]) + len(latency_v2), len(waiting[-1]) + len(waiting_v2)):
            if size > limits.max_histogram_bytes:
                raise BadReport(f"a histogram of {size} bytes (at most {limits.max_histogram_bytes})")
        any_v2 = any_v2 or bool(latency_v2 or waiting_v2)
    try:
        if counts_only:
            return [StatsRow.from_proto(s, EMPTY, EMPTY) for s in stats]
        if not any_v2:  # the agent's form: every row's buckets at once
            return [
                StatsRow.from_proto(s, h, w) for s, h, w in zip(stats, decode_buckets(latency), decode_buckets(waiting))
            ]
        return [StatsRow.from_proto(s).check() for s in stats]
    except HistogramError as exc:
        raise BadReport(str(exc)) from exc


def _names_problem(s: stats_pb2.IntervalStats, limits: ReportLimits) -> str | None:
    """A row's target and request not of the job, or (a Gatling simulation's, which names its
    own) not fit to be keys and columns; then its check names."""
    if limits.keys is None:  # names chosen by the driver (a Gatling simulation): keys and columns
        if problem := bounds.name_problem("a target", s.target) or bounds.name_problem("a request", s.request):
            return f"a row with {problem}"
    elif (s.scenario, s.target, s.request) not in limits.keys:
        scenario = f"scenario {s.scenario!r}, " if s.scenario else ""
        return f"a row for ({scenario}{s.target!r}, {s.request!r}), which is no target and request of the job"
    return _check_names_problem(s, limits)


def _check_names_problem(s: stats_pb2.IntervalStats, limits: ReportLimits) -> str | None:
    """Check names past their bounds, looked at before any becomes a key (wire/checks.py): a
    request's row names at most its 16 checks and 16 extractions, the `*`/`*` total those of
    every row (the report's other rows); and, for a job whose plan declares them
    (limits.check_names), only those its request declares, as a row only of the job's keys."""
    checks = s.checks
    if not checks:
        return None
    most = MAX_CHECKS_PER_ROW * max(1, limits.max_rows - 1) if s.target == TOTAL else MAX_CHECKS_PER_ROW
    if problem := names_problem((c.name for c in checks), most):
        return f"the row ({s.target!r}, {s.request!r}) has {problem}"
    if limits.check_names is not None:
        declared = limits.check_names.get(s.request, frozenset())
        if undeclared := next((c.name for c in checks if c.name not in declared), None):
            return f"the row ({s.target!r}, {s.request!r}) names {undeclared!r}, which is no check of its request"
    return None


_JOB_STATES: dict[int, JobState] = {
    agent_pb2.JOB_STATE_READY: JobState.READY,
    agent_pb2.JOB_STATE_RUNNING: JobState.RUNNING,
    agent_pb2.JOB_STATE_FINISHED: JobState.FINISHED,
    agent_pb2.JOB_STATE_FAILED: JobState.FAILED,
    agent_pb2.JOB_STATE_STOPPED: JobState.STOPPED,
}


def engine_failure_from_proto(agent_id: str, pb: agent_pb2.EngineFailure) -> EngineFailure:
    """An engine's end as its agent tells it; its texts printable, its last words on one
    line (lines joined by " | "), the end of them kept."""
    tail = pb.stderr_tail[-bounds.MAX_STDERR_TAIL :]
    lines = " | ".join(line.strip() for line in tail.splitlines() if line.strip())
    return EngineFailure(
        job_id=printable(pb.job_id, bounds.MAX_ID_CHARS),
        agent_id=agent_id,
        engine=pb.engine,
        pid=pb.pid,
        how=printable(pb.how, bounds.MAX_TEXT_CHARS),
        stderr_tail=printable(lines[-bounds.MAX_STDERR_TAIL :], bounds.MAX_STDERR_TAIL),
        reported_requests=min(pb.reported_requests, bounds.MAX_TOTAL),
        # at most one count per scenario a plan can have; an index the plan has not is unused
        reported_by_scenario=tuple(
            (c.scenario, min(c.requests, bounds.MAX_TOTAL)) for c in pb.reported[:MAX_SCENARIOS]
        ),
    )
