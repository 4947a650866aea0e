"""The registry of connected agents: identities, heartbeats, leases, loss.

An agent is lost when its session ends or when it has been silent for more than
`LOST_AFTER_HEARTBEATS` heartbeat periods. Lost agents stay listed (state LOST) so
that `loadfleet agents` shows them; an agent that reconnects with the same id joins
again. While an id's session is live, another session for it is refused (`join`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import EngineShare
from loadfleet.controller.model.errors import AgentIdInUse
from loadfleet.controller.model.health import Health
from loadfleet.controller.model.hostsamples import MonitorInfo
from loadfleet.controller.plan.feeds import Feed
from loadfleet.wire import DEFAULT_HEARTBEAT_MS

LOST_AFTER_HEARTBEATS = 3


class AgentState(enum.Enum):
    IDLE = "idle"
    BUSY = "busy"
    LOST = "lost"


@dataclass(frozen=True)
class AgentIdentity:
    agent_id: str
    hostname: str
    cores: int
    version: str = ""
    capabilities: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    # Set for a monitor-only agent: it reports its host and never takes load.
    monitor: MonitorInfo | None = None
    # Where it may send load, as it advertised (admission.py); empty: it did not say.
    allow_targets: tuple[str, ...] = ()
    # Where its Gatling projects must lie ("" : none, if it advertised an allow-list).
    gatling_root: str = ""


class AgentLink(Protocol):
    """The controller's end of one agent session. Methods queue and never block."""

    def assign(self, assignment: JobAssignment) -> None: ...

    def stop_job(self, job_id: str) -> None: ...

    def settle(self, seq: int) -> None:
        """The agent's message `seq` is stored for good: its session may acknowledge it."""

    def adjust(self, job_id: str, engines: tuple[EngineShare, ...], feed: Feed | None = None) -> None:
        """Each engine's share of the running job from now on (scheduler.EngineShare), with
        the cells of the rows of the plan's unique `feed` handed to them."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class ClockOffset:
    """The controller's clock minus an agent's, as the agent estimates it from heartbeat round
    trips (agent/clock.py: off by at most half of `rtt_ms`)."""

    offset_ms: int
    rtt_ms: int

    def describe(self) -> str:
        way = "ahead of" if self.offset_ms < 0 else "behind"
        return f"{abs(self.offset_ms):,} ms {way} the controller's (± {self.rtt_ms / 2:g} ms)"


@dataclass
class AgentRecord:
    identity: AgentIdentity
    link: AgentLink | None  # None while its session is broken (late) or when it is lost
    last_seen_s: float
    state: AgentState = AgentState.IDLE
    health: Health = field(default_factory=Health)
    last_seen_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # While it runs a job with a lease longer than the heartbeats' patience (the plan's
    # agents.lease_s), an agent that falls silent or whose session breaks is late, not lost,
    # until this long has passed: its load goes on that long without word.
    lease_s: float = 0.0
    late: bool = False  # told: silent or disconnected, within its lease
    clock: ClockOffset | None = None  # None until the agent has an estimate

    @property
    def agent_id(self) -> str:
        return self.identity.agent_id


class AgentRegistry:
    def __init__(
        self,
        *,
        heartbeat_ms: int = DEFAULT_HEARTBEAT_MS,
        clock: Callable[[], float] = time.monotonic,
        on_joined: Callable[[AgentRecord], None] = lambda record: None,
        on_lost: Callable[[AgentRecord, str], None] = lambda record, reason: None,
        on_late: Callable[[AgentRecord, str], None] = lambda record, reason: None,
        on_back: Callable[[AgentRecord], None] = lambda record: None,
    ):
        self.heartbeat_ms = heartbeat_ms
        self._clock = clock
        self._on_joined = on_joined
        self._on_lost = on_lost
        self._on_late = on_late
        self._on_back = on_back
        self._agents: dict[str, AgentRecord] = {}
        self._changed = asyncio.Event()

    def join(self, identity: AgentIdentity, link: AgentLink) -> AgentRecord:
        """Registers a new session. Raises AgentIdInUse while another session of this id is
        live: the first stays (a newcomer cannot evict it), and the second gets in once the
        first has ended or gone silent (LOST_AFTER_HEARTBEATS); agents redial with backoff."""
        previous = self._agents.get(identity.agent_id)
        if previous and previous.state is not AgentState.LOST and previous.link:
            raise AgentIdInUse(
                f"agent {identity.agent_id!r} has a live session already "
                f"(from {previous.identity.hostname or 'an unknown host'}); two agents may not "
                "share an id, and a reconnecting one gets in once the old session is lost"
            )
        if previous and previous.state is not AgentState.LOST:  # late, back within its lease
            previous.identity, previous.link, previous.late = identity, link, False
            previous.last_seen_s, previous.last_seen_ms = self._clock(), int(time.time() * 1000)
            self._on_back(previous)
            self._notify()
            return previous
        record = AgentRecord(identity=identity, link=link, last_seen_s=self._clock())
        self._agents[identity.agent_id] = record
        self._on_joined(record)
        self._notify()
        return record

    def seen(self, agent_id: str, health: Health | None = None, clock: ClockOffset | None = None) -> None:
        record = self._agents.get(agent_id)
        if record is None or record.state is AgentState.LOST:
            return
        record.last_seen_s = self._clock()
        record.last_seen_ms = int(time.time() * 1000)
        if health is not None:
            record.health = health
        if clock is not None:
            record.clock = clock
        if record.late and record.link is not None:  # heard again over the same session
            record.late = False
            self._on_back(record)

    def hold(self, agent_id: str, lease_s: float) -> None:
        """The agent runs a job with this lease (0: none): silence within it is late, not lost."""
        record = self._agents.get(agent_id)
        if record is not None:
            record.lease_s = lease_s

    def disconnected(self, agent_id: str, reason: str, link: AgentLink) -> None:
        """The agent's session `link` ended: late if its job's lease outlasts the heartbeats'
        patience (it may come back), else lost at once (its process is gone, or it will find
        its job stopped)."""
        record = self._agents.get(agent_id)
        if record is None or record.state is AgentState.LOST or record.link is not link:
            return
        if record.lease_s <= self.patience_s:
            self.lose(agent_id, reason)
            return
        record.link = None
        self._late(record, reason)

    def lose(self, agent_id: str, reason: str) -> None:
        """Marks an agent lost (once)."""
        record = self._agents.get(agent_id)
        if record is None or record.state is AgentState.LOST:
            return
        if record.link is not None:
            record.link.close()
        record.state = AgentState.LOST
        record.link = None
        record.late = False
        self._on_lost(record, reason)
        self._notify()

    def silent_s(self, record: AgentRecord) -> float:
        """How long ago the agent was last heard."""
        return max(0.0, self._clock() - record.last_seen_s)

    @property
    def patience_s(self) -> float:
        """How long an agent without a longer lease may be silent before it is lost."""
        return LOST_AFTER_HEARTBEATS * self.heartbeat_ms / 1000

    def close_sessions(self) -> None:
        """Ends every agent's session (the controller is stopping): their streams end cleanly
        and the agents redial."""
        for record in self._agents.values():
            if record.link is not None:
                record.link.close()

    def forgive_silence(self) -> None:
        """The controller itself was not running (paused, or its loop stalled): the agents'
        messages wait unread in its sockets, so their silence is ours, not theirs."""
        now = self._clock()
        for record in self._agents.values():
            record.last_seen_s = max(record.last_seen_s, now)

    def check_silent(self) -> None:
        """Agents silent past the heartbeats' patience are late while their lease lasts, then
        lost."""
        now = self._clock()
        for record in list(self._agents.values()):
            silent_s = now - record.last_seen_s
            if record.state is AgentState.LOST or silent_s <= self.patience_s:
                continue
            if silent_s > max(self.patience_s, record.lease_s):
                reason = "silent" if record.link else "disconnected and silent"
                self.lose(
                    record.agent_id,
                    f"{reason} for {silent_s:.1f} s"
                    + (f", past its lease of {record.lease_s:g} s" if record.lease_s > self.patience_s else ""),
                )
            else:
                self._late(record, f"silent for {silent_s:.1f} s")

    def _late(self, record: AgentRecord, reason: str) -> None:
        if not record.late:
            record.late = True
            self._on_late(record, reason)

    def get(self, agent_id: str) -> AgentRecord | None:
        return self._agents.get(agent_id)

    def all(self) -> list[AgentRecord]:
        return sorted(self._agents.values(), key=lambda r: r.agent_id)

    def connected(self) -> int:
        """How many agents have a session now."""
        return sum(1 for record in self._agents.values() if record.link is not None)

    def idle(self, labels: Callable[[dict[str, str]], bool] = lambda labels: True) -> list[AgentRecord]:
        return [
            r
            for r in self.all()
            if r.state is AgentState.IDLE and r.identity.monitor is None and labels(dict(r.identity.labels))
        ]

    async def wait_changed(self, timeout_s: float) -> None:
        """Returns when an agent joined or was lost, or after `timeout_s`."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
