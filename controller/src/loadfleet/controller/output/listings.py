"""The controller's listings as text: its agents (`loadfleet agents`) and its runs (`loadfleet
runs`)."""

from __future__ import annotations

from loadfleet.v1 import run_pb2


def agents_table(agents: list[run_pb2.AgentInfo]) -> str:
    if not agents:
        return "no agents connected"
    lines = [
        f"{'agent':<24} {'state':<6} {'host':<16} {'version':<8} {'cores':>5} {'cpu %':>6} {'rss MB':>7} "
        f"{'clock ms':>9}  labels"
    ]
    for a in agents:
        state = run_pb2.AgentState.Name(a.state).removeprefix("AGENT_STATE_").lower()
        labels = ",".join(f"{k}={v}" for k, v in sorted(a.labels.items()))
        watches = f"  monitors {a.monitors}" if a.monitors else ""
        allows = f"  allows {','.join(a.allow_targets)}" if a.allow_targets and not a.monitors else ""
        # The agent's clock against the controller's (+: ahead); "?" until it has measured it.
        clock = f"{-a.clock_offset_ms:+d}" if a.clock_measured else "?"
        lines.append(
            f"{a.agent_id:<24} {state:<6} {a.hostname:<16} {a.version:<8} {a.cores:>5} "
            f"{a.health.cpu_pct:>6.1f} {a.health.rss_mb:>7.1f} {clock:>9}  {labels}{watches}{allows}"
        )
    return "\n".join(lines)


def runs_table(runs: list[run_pb2.RunInfo]) -> str:
    if not runs:
        return "no runs on this controller"
    lines = [f"{'run':<22} {'state':<9} {'plan':<20} {'requests':>10}  directory"]
    for r in runs:
        state = run_pb2.RunState.Name(r.state).removeprefix("RUN_STATE_").lower()
        lines.append(f"{r.run_id:<22} {state:<9} {r.plan_name:<20} {r.requests:>10}  {r.run_dir}")
    return "\n".join(lines)
