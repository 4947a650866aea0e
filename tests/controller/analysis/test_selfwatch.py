"""The controller's own health (selfwatch.py): the probe on a real event loop, the run's
recorder of its samples, and where the samples go (controller.csv, the console)."""

from __future__ import annotations

import asyncio
import csv
import time

import pytest

from loadfleet.controller.analysis.selfwatch import STALL_EVENT_PERIOD_S, ControllerRecorder, LoopProbe, StallStacks
from loadfleet.controller.model.events import EventKind
from loadfleet.controller.model.hostsamples import HostSample, MonitorInfo
from loadfleet.controller.model.selfsample import ControllerSample
from loadfleet.controller.output.rundir import RunDirWriter
from support.streamdata import window


def _burn(cpu_s: float) -> None:
    """Holds the loop until this much CPU is spent (longer on a busy machine)."""
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass


def test_the_probe_sees_the_loop_blocked_and_the_cpu_it_burnt():
    samples: list[ControllerSample] = []

    async def scenario() -> None:
        probe = asyncio.create_task(LoopProbe(samples.append, agents=lambda: 7).run())
        await asyncio.sleep(1.3)
        _burn(0.7)  # a callback that holds the loop, as a long merge would
        while len(samples) < 3:
            await asyncio.sleep(0.05)
        probe.cancel()

    asyncio.run(scenario())
    lags = [s.loop_lag_ms for s in samples]
    assert max(lags) >= 650, lags  # the blocked second
    assert sorted(lags)[0] < 100, lags  # a second the loop was free
    blocked = samples[lags.index(max(lags))]
    assert blocked.cpu_pct >= 15  # 0.7 CPU-seconds in a sample of 1.7 s, longer if the machine is busy
    assert min(s.cpu_pct for s in samples) < 10  # an idle second: ten timers
    assert all(s.agents == 7 and s.rss_mb > 10 for s in samples)
    assert [s.at_ms for s in samples] == sorted(s.at_ms for s in samples)


def _sample(lag_ms: float, *, at_s: float = 0.0, cpu: float = 20.0, rss: float = 100.0, agents: int = 3):
    return ControllerSample(int(at_s * 1000), loop_lag_ms=lag_ms, cpu_pct=cpu, rss_mb=rss, agents=agents)


def test_the_recorder_sums_up_the_samples_and_raises_a_stall_event_at_most_once_a_minute():
    events, now = [], [0.0]
    recorder = ControllerRecorder(emit=events.append, clock=lambda: now[0])
    assert recorder.load() is None  # no sample yet
    for i, lag in enumerate([2.0] * 97 + [650.0, 900.0, 3.0]):
        now[0] = float(i)
        recorder.on_controller(_sample(lag, at_s=i, cpu=10.0 if i % 2 else 30.0, rss=100.0 + i, agents=i % 5))
    load = recorder.load()
    assert load is not None
    assert load.samples == 100 and load.stalls == 2
    assert load.loop_lag_max_ms == 900.0
    assert load.loop_lag_p50_ms == pytest.approx(2.0, rel=0.01)
    assert load.loop_lag_p99_ms == pytest.approx(650.0, rel=0.01)  # the 99th of 100 samples
    assert load.cpu_mean_pct == pytest.approx(20.0) and load.cpu_max_pct == 30.0
    assert load.rss_max_mb == 199.0 and load.agents_max == 4
    assert [e.kind for e in events] == [EventKind.CONTROLLER_STALLED]  # the 900 ms second, a second later: untold
    assert "650 ms late" in events[0].text and events[0].at_ms == 97_000
    now[0] += STALL_EVENT_PERIOD_S
    recorder.on_controller(_sample(1200.0, at_s=now[0]))
    assert len(events) == 2 and "1 more stall(s)" in events[1].text
    assert "1,200 ms" in recorder.load().describe() and "3 second(s) 500 ms late" in recorder.load().describe()


def test_controller_csv_is_appended_and_a_run_taken_over_keeps_what_was_written(tmp_path):
    run_dir = tmp_path / "run"
    step = window("main", start_ms=0, seconds=10)
    host = HostSample(
        at_ms=5, cores=2, cpu_pct=1.0, mem_used_pct=2.0, net_rx_bytes_per_s=0, net_tx_bytes_per_s=0, tcp_established=1
    )
    writer = RunDirWriter(run_dir, ["http://t:1"])
    writer.on_controller(_sample(3.5, at_s=1))
    writer.on_host(step, "web1", MonitorInfo(role="web"), host)
    writer.close()
    # A controller that takes the run over opens the files again: they go on, not over.
    again = RunDirWriter(run_dir, ["http://t:1"])
    again.on_controller(_sample(700.0, at_s=2, agents=4))
    again.on_host(step, "web1", MonitorInfo(role="web"), host)
    again.close()
    with (run_dir / "controller.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["time_ms"], r["loop_lag_ms"], r["agents"]) for r in rows] == [
        ("1000", "3.5", "3"),
        ("2000", "700.0", "4"),
    ]
    with (run_dir / "hosts.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2


class _Link:
    """An agent's session as the registry sees it: closed when the agent is lost."""

    def close(self) -> None:
        pass


def test_a_stalled_controller_does_not_blame_its_agents_for_the_silence(tmp_path):
    """The loop probe judges the agents at each wake: a controller that did not run for longer
    than the agents' patience (its loop held, as by a SIGSTOP or a long merge) forgives them
    the silence it caused; an agent silent while the controller ran is lost."""
    from loadfleet.controller.fleet.agents import AgentIdentity, AgentState
    from loadfleet.controller.service.controller import Controller

    async def scenario() -> tuple[AgentState, AgentState]:
        controller = Controller(runs_dir=tmp_path, heartbeat_ms=200)  # patience: 3 heartbeats, 0.6 s
        await controller.start()
        try:
            quiet = controller.registry.join(AgentIdentity("quiet", "h", 1), _Link())  # type: ignore[arg-type]
            await asyncio.sleep(0.2)
            time.sleep(1.5)  # the loop held: nobody's heartbeat is read
            await asyncio.sleep(0.3)  # the probe's first wake after it: forgiven
            after_stall = quiet.state
            await asyncio.sleep(1.0)  # now the controller runs and still hears nothing
            return after_stall, quiet.state
        finally:
            await controller.close()

    after_stall, later = asyncio.run(scenario())
    assert after_stall is AgentState.IDLE
    assert later is AgentState.LOST


def _hold_the_loop_like_a_long_merge(cpu_s: float) -> None:
    _burn(cpu_s)


def _hold_the_loop_for_wall_seconds(wall_s: float) -> None:
    end = time.monotonic() + wall_s
    while time.monotonic() < end:
        pass


def test_a_stalled_loop_has_its_stacks_written_while_it_is_stuck_at_most_once_a_minute(tmp_path, caplog):
    dump = (tmp_path / "stacks.txt").open("w+")
    samples: list[ControllerSample] = []

    async def scenario() -> None:
        probe = asyncio.create_task(LoopProbe(samples.append, agents=lambda: 1, stacks=StallStacks(dump)).run())
        await asyncio.sleep(0.5)
        # Late, not stalled: nothing written. Held by the wall clock, not by CPU spent (on a
        # busy machine 0.3 s of CPU took 0.7 s, past STALL_MS), so the margin is 0.35 s.
        _hold_the_loop_for_wall_seconds(0.15)
        await asyncio.sleep(0.3)
        assert dump.tell() == 0
        _hold_the_loop_like_a_long_merge(0.9)
        await asyncio.sleep(0.3)
        _hold_the_loop_like_a_long_merge(0.9)  # within the minute: not written again
        await asyncio.sleep(0.3)
        probe.cancel()

    with caplog.at_level("WARNING"):
        asyncio.run(scenario())
    time.sleep(0.8)  # the watchdog is disarmed with the probe: nothing comes after
    dump.seek(0)
    text = dump.read()
    assert text.count("Timeout (") == 1, text
    assert "_hold_the_loop_like_a_long_merge" in text and "test_selfwatch.py" in text
    assert sum("stacks of the controller's threads" in r.message for r in caplog.records) == 1
