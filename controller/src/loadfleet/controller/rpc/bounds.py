"""What an agent may say: the bounds on the counts, enums and texts of its messages.

An agent is trusted with its own load, not with the controller: a rogue or broken one must
not harm another run, the controller or an operator's terminal. So every value an agent
sends is checked where it enters, in the conversion from protobuf (convert.py), and nothing
downstream sees one past these bounds:

- a Hello past a bound is refused (the session ends with INVALID_ARGUMENT): what it claims
  sizes work and memory for as long as the agent is connected;
- a report past a bound is refused whole (BadReport, not counted): one impossible count
  makes every figure of the interval a lie;
- a text is cleaned (loadfleet.wire.text.printable) and cut: it is an account of something
  that happened, worth keeping once it cannot command a terminal;
- a heartbeat is never refused (it keeps the agent's lease): a figure that is no number
  (NaN, infinity) is left unset, so is a process's CPU cap past its bound, and a monitored
  host's lists are cut to their bounds.

The checks here say what is wrong (None: nothing); convert.py raises or cuts.
"""

from __future__ import annotations

import math

from loadfleet.controller.fleet.scheduler import MAX_ENGINES_PER_AGENT
from loadfleet.v1 import agent_pb2
from loadfleet.wire.phases import PHASE_NAMES
from loadfleet.wire.stats import ERROR_KINDS, StatsRow
from loadfleet.wire.text import is_printable

# ---- Hello: claims that size the controller's work for the agent's whole session.
MAX_CORES = MAX_ENGINES_PER_AGENT  # the controller runs one engine per core, at most this many
MAX_ID_CHARS = 256  # an agent id, a job id (a host name and a pid fit)
MAX_NAME_CHARS = 256  # a host name, version, label key or value, capability, allow-list entry, ...
MAX_PATH_CHARS = 4096  # gatling_root (PATH_MAX)
MAX_LABELS = 64
MAX_CAPABILITIES = 32
MAX_ALLOW_TARGETS = 1024
MAX_MONITOR_ENTRIES = 256  # a monitor's targets, and its processes
MAX_RUNNING_JOBS = 1024  # jobs an agent says it runs as it reconnects

# ---- Reports: a count of one row of one interval can never exceed what an interval could
# hold. 2^40 (1.1 x 10^12) requests is a million engines at a million requests a second for
# a second, more than any fleet sends in one interval; and 2^24 reports of that size still
# fit the uint64 in which the controller sends sums on (RunInfo.requests), so a run's total
# cannot overflow in the life of a controller.
# A unique feed's rows an agent says it took in an interval: one range per engine, joined.
MAX_FEED_RANGES = MAX_ENGINES_PER_AGENT
# A row number of a feed (a data file has at most 100,000 rows: plan/feeds.py).
MAX_FEED_ROW = 2**32
MAX_COUNT = 2**40  # requests, responses, errors, connections, users, phase counts of a row
MAX_BYTES = 2**50  # bytes in or out of one row in one interval (a PiB)
MAX_US = 2**40  # a largest time in microseconds (send lag, a phase's max): 12.7 days
MAX_SUM_US = 2**62  # a phase's sum of microseconds (MAX_COUNT responses of up to 2^22 s)
MAX_SEND_LAG_SUM_US = MAX_SUM_US  # the open model's send lags summed: MAX_COUNT sends of up to 2^22 s late
KNOWN_ERROR_KINDS = frozenset(ERROR_KINDS)

# ---- Texts: what is kept of a diagnostic text (longer is cut, marked with "…").
MAX_TEXT_CHARS = 1000  # a job status message, an engine's `how`, a spool drop's cause, an error sample
MAX_STDERR_TAIL = 2000  # an engine's last words: its last lines, not a log

# ---- Heartbeats of a monitor-only agent (one a second): its host's lists.
MAX_HOST_PROCESSES = MAX_MONITOR_ENTRIES  # one per process name its Hello asked to watch
MAX_HOST_COUNTERS = 4096  # 13 HAProxy counters of 300 servers, or Varnish's and ganesha's
# A process group's CPU cap, percent of one core: 4,096 cores' worth, more than any host has.
MAX_PROCESS_CAP_PCT = 100.0 * 4096
# An agent's clock may be off by years (the controller converts its times), not by more; and
# no time it stamps is past 2109 (2^42 ms after 1970).
MAX_CLOCK_OFFSET_MS = 100 * 365 * 86_400_000
MAX_TIME_MS = 2**42
# A count over many intervals (a spool drop's requests, an engine's reported requests) is
# cut to what JSON holds exactly.
MAX_TOTAL = 2**53


def _length_problem(what: str, text: str, max_chars: int = MAX_NAME_CHARS) -> str | None:
    if len(text) > max_chars:
        return f"{what} is {len(text):,} characters long (at most {max_chars:,})"
    return None


def _many_problem(what: str, n: int, most: int) -> str | None:
    return f"{n:,} {what} (at most {most:,})" if n > most else None


def hello_problems(hello: agent_pb2.Hello) -> list[str]:
    """Everything wrong with a Hello, at once: counts and lengths past their bounds, and an
    agent id that is not printable (an id is a key and a directory name: it is never
    rewritten). Counts are read before any list is iterated."""
    problems = [
        f"cores {hello.cores:,}: more than the {MAX_CORES:,} engines a controller runs on one agent "
        f"(start it with --cores {MAX_CORES} or fewer)"
        if hello.cores > MAX_CORES
        else None,
        _many_problem("labels", len(hello.labels), MAX_LABELS),
        _many_problem("capabilities", len(hello.capabilities), MAX_CAPABILITIES),
        _many_problem("allow_targets entries", len(hello.allow_targets), MAX_ALLOW_TARGETS),
        _many_problem("running_jobs", len(hello.running_jobs), MAX_RUNNING_JOBS),
        name_problem("agent_id", hello.agent_id, MAX_ID_CHARS),
        _length_problem("hostname", hello.hostname),
        _length_problem("version", hello.version),
        _length_problem("gatling_root", hello.gatling_root, MAX_PATH_CHARS),
    ]
    if hello.HasField("monitor"):
        monitor = hello.monitor
        problems += [
            _many_problem("monitor targets", len(monitor.targets), MAX_MONITOR_ENTRIES),
            _many_problem("monitor processes", len(monitor.processes), MAX_MONITOR_ENTRIES),
            _length_problem("monitor role", monitor.role),
        ]
    found = [p for p in problems if p]
    if found:  # a list past its bound is not read further
        return found
    texts = [
        *(("a label", t) for kv in hello.labels.items() for t in kv),
        *(("a capability", t) for t in hello.capabilities),
        *(("an allow_targets entry", t) for t in hello.allow_targets),
        *(("a running job's id", j.job_id) for j in hello.running_jobs),
    ]
    if hello.HasField("monitor"):
        texts += [("a monitor target", t) for t in hello.monitor.targets]
        texts += [("a monitor process", t) for t in hello.monitor.processes]
    return [p for what, text in texts if (p := _length_problem(what, text))]


def _feed_problem(where: str, row: StatsRow) -> str | None:
    if len(row.feed_taken) > MAX_FEED_RANGES or any(end > MAX_FEED_ROW for _, end in row.feed_taken):
        return f"{where} reports {len(row.feed_taken):,} ranges of feed rows (at most {MAX_FEED_RANGES:,} below 2^32)"
    return None


def row_problem(row: StatsRow) -> str | None:
    """What is impossible about one row of one interval: a count past what an interval could
    hold, an error kind this controller does not know (proto3 enums are open), or more
    responses and errors than requests. None: nothing."""
    where = f"the row ({row.target!r}, {row.request!r})"
    most = max(
        row.requests,
        *row.status,
        row.connections_opened,
        row.connections_closed,
        row.active_connections,
        row.users,
        row.active_streams,
        row.scheduled,
        row.sent_late,
        row.not_sent,
    )
    if most > MAX_COUNT:
        return f"{where} counts {most:,}, more than one interval can hold ({MAX_COUNT:,})"
    if problem := _errors_problem(where, row) or _feed_problem(where, row):
        return problem
    ended = sum(row.status) + sum(row.errors.values())
    if ended > row.requests:
        return f"{where} has {ended:,} responses and errors, more than its {row.requests:,} requests"
    if max(row.bytes_in, row.bytes_out) > MAX_BYTES:
        return f"{where} counts {max(row.bytes_in, row.bytes_out):,} bytes (at most {MAX_BYTES:,})"
    if row.max_send_lag_us > MAX_US:
        return f"{where} has a send lag of {row.max_send_lag_us:,} µs (at most {MAX_US:,})"
    if row.send_lag_sum_us > MAX_SEND_LAG_SUM_US:
        return f"{where} sums a send lag of {row.send_lag_sum_us:,} µs (at most {MAX_SEND_LAG_SUM_US:,})"
    if row.phases is not None:
        for name in PHASE_NAMES:
            phase = getattr(row.phases, name)
            if phase.count > MAX_COUNT or phase.max_us > MAX_US or phase.sum_us > MAX_SUM_US:
                return f"{where} has an impossible {name} phase ({phase})"
    return None


def _errors_problem(where: str, row: StatsRow) -> str | None:
    """An error kind this controller does not know, or an error count past an interval's."""
    if not row.errors:
        return None
    unknown = sorted(set(row.errors) - KNOWN_ERROR_KINDS)
    if unknown:
        return f"{where} counts errors of kind {unknown[0]}, which is no ErrorKind"
    if max(row.errors.values()) > MAX_COUNT:
        return f"{where} counts {max(row.errors.values()):,} errors of a kind (at most {MAX_COUNT:,})"
    return None


def name_problem(what: str, name: str, max_chars: int = MAX_NAME_CHARS) -> str | None:
    """A name that becomes a key, a column or a directory (an agent id, a Gatling simulation's
    request or target): refused when too long (looked at first: no scan of a long one) or not
    printable, never rewritten (two names must not merge)."""
    return _length_problem(what, name, max_chars) or (
        None if is_printable(name) else f"{what} holds control characters: {name!r}"
    )


def finite(x: float) -> float:
    """A figure, or 0.0 (unset) when it is no number: NaN and infinities mean nothing, and
    InfluxDB refuses them."""
    return x if math.isfinite(x) else 0.0


def process_cap(cap_pct: float) -> float:
    """A process group's CPU cap, or 0.0 (unknown, the host's cores stand for it) when it is
    no number, not positive or past MAX_PROCESS_CAP_PCT: a cap is the bottleneck rule's
    yardstick (analysis/bottleneck.py), and a wrong one is worse than none."""
    return cap_pct if 0 < cap_pct <= MAX_PROCESS_CAP_PCT else 0.0
