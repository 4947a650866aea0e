"""An agent refuses, before any driver starts, a job aimed outside its allow-list or a
Gatling project outside its root; drivers get the addresses it checked."""

import asyncio

import pytest

from loadfleet.agent.errors import JobRefused
from loadfleet.agent.guard import LoadPolicy
from loadfleet.v1 import job_pb2
from loadfleet.wire.allowlist import AllowList


def spec(*urls, project=""):
    job = job_pb2.JobSpec(job_id="j", targets=[job_pb2.Target(url=u, weight=1) for u in urls])
    if project:
        job.driver = job_pb2.DRIVER_GATLING
        job.gatling.project = project
    return job


def confine(policy, job, shares=1):
    return asyncio.run(policy.confine(job, [job] * shares))


def test_checked_addresses_go_to_every_driver():
    job, shares = confine(LoadPolicy(), spec("http://127.0.0.2:8080", "https://[::1]:8443", "http://127.0.0.3"), 2)
    for s in (job, *shares):
        assert [list(t.addresses) for t in s.targets] == [["127.0.0.2:8080"], ["[::1]:8443"], ["127.0.0.3:80"]]


def test_a_name_is_resolved_once_and_every_address_checked():
    job, _ = confine(LoadPolicy(), spec("http://localhost:8080"))
    assert set(job.targets[0].addresses) <= {"127.0.0.1:8080", "[::1]:8080"} and job.targets[0].addresses
    with pytest.raises(JobRefused, match=r"localhost is 127\.0\.0\.1\).*outside this agent's allow-list"):
        confine(LoadPolicy(allow=AllowList.parse("127.0.0.2,::1")), spec("http://localhost:8080"))


@pytest.mark.parametrize(
    "allow, url",
    [
        ("127.0.0.2", "http://127.0.0.3:80"),
        ("127.0.0.0/8:8080", "http://127.0.0.1:8081"),
        (None, "http://10.1.2.3:80"),
        (None, "http://[::ffff:10.1.2.3]:80"),
        (None, "http://0.0.0.0:80"),
    ],
)
def test_a_target_outside_the_list_refuses_the_whole_job(allow, url):
    policy = LoadPolicy(allow=AllowList.parse(allow)) if allow else LoadPolicy()
    with pytest.raises(JobRefused, match=r"targets\[1\].*outside this agent's allow-list"):
        confine(policy, spec("http://127.0.0.2:80" if allow != "127.0.0.0/8:8080" else "http://127.0.0.1:8080", url))


def test_a_name_that_does_not_resolve_is_refused():
    with pytest.raises(JobRefused, match="cannot resolve"):
        confine(LoadPolicy(), spec("http://no-such-host.invalid:80"))


def test_gatling_projects_only_under_the_root(tmp_path):
    root = tmp_path / "projects"
    (root / "demo").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "escape").symlink_to(tmp_path / "elsewhere")
    policy = LoadPolicy(gatling_root=root)
    job, _ = confine(policy, spec("http://127.0.0.1:1", project=str(root / "demo")))
    assert job.gatling.project == str(root / "demo")
    for project in (tmp_path / "elsewhere", root / "escape", root / ".." / "elsewhere", "relative/demo"):
        with pytest.raises(JobRefused, match="not under this agent's --gatling-root"):
            confine(policy, spec("http://127.0.0.1:1", project=str(project)))
    with pytest.raises(JobRefused, match="runs no Gatling projects"):
        confine(LoadPolicy(), spec("http://127.0.0.1:1", project=str(root / "demo")))


@pytest.mark.parametrize(
    "allow, url",
    [
        # the audit's B1: glibc reads 127.0.0.8 (allowed), Java 127.0.0.10 (not allowed)
        ("127.0.0.8/32", "http://127.0.0.010:18090"),
        # glibc reads 127.0.0.1 (loopback, the default list), Java 177.0.0.1 (a public address)
        (None, "http://0177.0.0.1:80"),
        (None, "http://0x7f.0.0.1:80"),
        (None, "http://127.1:80"),
        (None, "http://2130706433:80"),
        (None, "http://１２７.０.０.１:80"),  # noqa: RUF001 - full-width digits: hostile on purpose
    ],
)
def test_a_non_canonical_ipv4_literal_refuses_the_job_whatever_the_controller_checked(allow, url):
    """The agent is the last lock: a job with such a target never reaches a driver, even
    when the address glibc reads is on the list."""
    policy = LoadPolicy(allow=AllowList.parse(allow)) if allow else LoadPolicy()
    with pytest.raises(JobRefused, match=r"targets\[1\] .*is an IPv4 address in a non-canonical form"):
        confine(policy, spec("http://127.0.0.8:80", url))
