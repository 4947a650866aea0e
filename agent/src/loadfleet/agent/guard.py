"""What this agent agrees to run: its targets inside the allow-list, a Gatling project under
its root. Checked for every job before any driver starts, so a refused job opens no socket
to its targets.

Each target's host is resolved once, here; every address must be on the allow-list, else
the whole job is refused with the address and the list in the message. The checked
addresses go to the drivers in `Target.addresses` ("ip:port"), and the engine connects
only to those: nothing is resolved a second time, so a name cannot point elsewhere
between the check and the load (DNS rebinding). An IPv4 address must be written canonically
(`ipv4_form_problem`): glibc reads `0177.0.0.1` as 127.0.0.1 and Java as 177.0.0.1, and this
agent is the last lock whatever its controller checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path

from loadfleet.v1 import job_pb2
from loadfleet.wire.allowlist import (
    LOOPBACK_ONLY,
    AllowList,
    IpAddress,
    ipv4_form_problem,
    socket_address,
    url_host_port,
)

from .errors import JobRefused

# A name that takes longer than this to resolve is refused (the job has a barrier to meet).
RESOLVE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class LoadPolicy:
    """The agent operator's limits on the load this agent produces (docs/security.md)."""

    allow: AllowList = LOOPBACK_ONLY
    # A user's Gatling project must lie under this directory; None: no user projects.
    gatling_root: Path | None = None

    async def confine(
        self, job: job_pb2.JobSpec, shares: list[job_pb2.JobSpec]
    ) -> tuple[job_pb2.JobSpec, list[job_pb2.JobSpec]]:
        """The job and its per-driver specs with checked addresses; JobRefused when not allowed."""
        self._check_project(job)
        addresses = await self.checked_addresses(job)
        # A scenario's targets are its own (JobSpec.scenarios[i].job): each is checked too.
        nested = [
            await self.checked_addresses(s.job, f"scenarios[{i}] ({s.name}).") for i, s in enumerate(job.scenarios)
        ]
        confined = []
        for spec in (job, *shares):
            copy = job_pb2.JobSpec()
            copy.CopyFrom(spec)
            for target, checked in zip(copy.targets, addresses):
                target.addresses[:] = checked
            for scenario, checked_nested in zip(copy.scenarios, nested):
                for target, checked in zip(scenario.job.targets, checked_nested):
                    target.addresses[:] = checked
            confined.append(copy)
        return confined[0], confined[1:]

    async def checked_addresses(self, job: job_pb2.JobSpec, field: str = "") -> list[list[str]]:
        """Per target, its addresses as "ip:port", each checked against the allow-list;
        `field` introduces the targets in a refusal (a scenario's)."""
        urls = [t.url for t in job.targets]
        for i, url in enumerate(urls):
            problem = ipv4_form_problem(url_host_port(url)[0])
            if problem:
                raise JobRefused(f"{field}targets[{i}] {url}: {problem}")
        hosts = {url_host_port(url) for url in urls} | {(e.host, 0) for e in self.allow.host_entries if e.host}
        resolved = dict(zip(hosts, await asyncio.gather(*(_resolve(h, p) for h, p in hosts))))
        named = {e: set(resolved[(e.host, 0)]) for e in self.allow.host_entries if e.host}
        checked = []
        for i, url in enumerate(urls):
            host, port = url_host_port(url)
            addresses = resolved[(host, port)]
            if not addresses:
                raise JobRefused(f"{field}targets[{i}] {url}: cannot resolve {host!r} on this agent")
            for address in addresses:
                if not self.allow.allows(address, port, named):
                    shown = f" ({host} is {address})" if host != str(address) else ""
                    raise JobRefused(
                        f"{field}targets[{i}] {url}{shown}: {socket_address(address, port)} is outside this "
                        f"agent's allow-list ({self.allow}); its operator can extend it with "
                        "--allow-targets (docs/security.md)"
                    )
            checked.append([socket_address(a, port) for a in addresses])
        return checked

    def _check_project(self, job: job_pb2.JobSpec) -> None:
        project = job.gatling.project
        if not project:
            return
        if self.gatling_root is None:
            raise JobRefused(
                f"this agent runs no Gatling projects (its operator can allow those under a directory "
                f"with --gatling-root); the job names {project}"
            )
        path = Path(project)
        # resolve(): a symlink or .. inside the root must not lead out of it.
        if not path.is_absolute() or not path.resolve().is_relative_to(self.gatling_root.resolve()):
            raise JobRefused(
                f"the Gatling project {project} is not under this agent's --gatling-root {self.gatling_root}"
            )


async def _resolve(host: str, port: int) -> list[IpAddress]:
    """Every address of `host` in the resolver's order of preference (an IP literal is
    itself); empty when it does not resolve."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port or None, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S)
    except (OSError, TimeoutError, UnicodeError):
        return []
    # typeshed allows an int for the address (an IPv6 socket of a Python without IPv6): not here
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))  # type: ignore[union-attr]
