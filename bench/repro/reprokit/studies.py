"""The five studies as the script runs them: lab specs, cells and the short levels used here.

A cell is one server/setup × page/scenario: a repository plan run with its named targets pointed
at the lab (`--target NAME=URL`). Cells of a study run interleaved (pass 1 in order, pass 2 in
reverse, ...). `sweep` replaces the plan's sweep levels and step lengths so that a whole study
takes minutes here; `level_vars` names what a level's entries are (a users sweep of
[users, spawn_rate] pairs: ("users", "spawn_rate")), `step_vars` takes variables from a step's
own fields. A cell's `changes` go into its plan over the plan's own (study 000: each test size's
threads, loops and budget). Plans are copied with these changes into the work directory; the
repository's plans are not changed.

A run without a sweep that ends with its request budget (study 000: a JMeter thread group) is
observed whole, from its totals: every response counts, however late, as in JMeter's aggregate
report (evidence.py).

`run_on`: a study whose lab has hosts of its own (network namespaces, shaped links) runs each cell
on the lab's controller host with the lab's agents (`loadfleet-lab exec HOST -- loadfleet run`),
not with `--local` agents beside the repository.

`paper_test_s`: when the paper's findings are about time (study 003: two 2-minute arrival
phases, 240 s) and a run plays the paper's whole test in fewer seconds, the test's length in
the paper. A run's time is then stretched by paper_test_s / the run's load time (the plan's
duration_s, or its sweep's steps x step_s), so that `t` in findings.yaml stays the paper's
seconds (`paper_s_per_run_s`, recorded in each run's cell.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LabSpec:
    spec: str  # path in the repository
    state_dir: str  # under the repository


@dataclass(frozen=True)
class Cell:
    name: str
    vars: dict
    plan: str
    targets: dict = field(default_factory=dict)  # plan target name -> URL
    # Why the lab's servers are NOT restarted before this cell (e.g. a soak that must keep its warm
    # state); empty: they are restarted (restarts.py).
    keep_warm: str = ""
    # Set in the cell's plan over the plan's own, section by section (mappings merged, other values
    # replaced): {"load": {"users": 100}, "budget": {"requests": 70000}}.
    changes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Study:
    id: str
    title: str
    labs: tuple[LabSpec, ...]
    cells: tuple[Cell, ...]
    sweep: dict  # overrides of the plan's sweep
    level_vars: tuple[str, ...]
    step_vars: dict = field(default_factory=dict)  # var -> steps.csv field
    generator_cpus: str = ""  # taskset list for the generator, when the lab caps servers to others
    paper_test_s: float | None = None  # the paper's test that each run plays; None: t is the run's own
    # Each run takes the sweep's cluster sizes (`servers`) in its own random order, seeded by the
    # pass and the cell, so that a drift over a run does not fall on the largest clusters alone.
    shuffle_servers: bool = False
    # The lab host (of the study's one lab with hosts) that runs each cell's `loadfleet run`, with
    # the lab's own agents; "": the kit's `--local` agents, pinned to generator_cpus.
    run_on: str = ""
    # The kit's `--local` agents (each an engine, all pinned to generator_cpus): more than one where a
    # run holds more connections than one process may open (study 003).
    local_agents: int = 1
    note: str = ""


# Study 000's test sizes: the paper's seven tests of 10,000 .. 70,000 requests.
TEST_SIZES_000 = tuple(range(10_000, 70_001, 10_000))
# Its two thread-group designs (the paper gives no thread count): design -> (threads, loops) of a
# test of `requests`. `fixed`: 100 threads whose loop count grows with the test; `growing`: a
# thread per 10 requests, so the threads (1,000 .. 7,000) cross prefork's 150 workers and nginx's
# 768 connections from the first test on.
THREAD_GROUPS_000 = {
    "fixed": lambda requests: (100, requests // 100),
    "growing": lambda requests: (requests // 10, 10),
}


def _thread_group(threads: int, loops: int) -> dict:
    """A JMeter thread group as plan changes: `threads` users started within a second (JMeter's
    default ramp-up), `loops` requests each, and the test's requests as the run's budget."""
    return {
        "load": {"users": threads, "spawn_rate": threads},
        "workload": {"session": {"repeat": loops}},
        "budget": {"requests": threads * loops},
    }


def _study_000() -> Study:
    lab = LabSpec("targets/specs/study-000-hosts.yaml", "build/study-000-hosts")
    urls = {"nginx": "http://10.231.100.10:80", "apache": "http://10.231.100.11:80"}
    # size by size, and within a size design by design and server by server, so that a drift over
    # a pass falls on every server and design alike
    cells = tuple(
        Cell(
            f"{server}-{design}-{requests // 1000}k",
            {"server": server, "design": design, "requests": requests},
            "plans/repro-jmeter-thread-group.yaml",
            {"web": url},
            changes=_thread_group(*threads_and_loops(requests)),
        )
        for requests in TEST_SIZES_000
        for design, threads_and_loops in THREAD_GROUPS_000.items()
        for server, url in urls.items()
    )
    return Study(
        "000",
        "JMeter: nginx vs Apache prefork, stock, over a 100 Mbit/s link; thread groups of 10k .. 70k requests",
        (lab,),
        cells,
        sweep={},  # each cell is one test, run to its budget
        level_vars=(),
        generator_cpus="0",  # the lab's agent and controller hosts are on CPU 0 (the lab spec)
        run_on="ctrl",
        note="each server on a host of its own behind a 100 Mbit/s link, on half of CPU 1, stock configuration; "
        "a JMeter thread group per test (threads started within 1 s, each looping on its keep-alive connection, "
        "no connect timeout, a 60 s response timeout), run until every thread has looped and observed whole; "
        "the paper gives no thread "
        "count, so both a fixed 100 threads and a thread per 10 requests are run",
    )


def _study_001() -> Study:
    lab = LabSpec("targets/specs/study-001-lb.yaml", "build/study-001")
    urls = {
        "apache": "http://127.0.0.40:18721",
        "haproxy": "http://127.0.0.43:18721",
        "varnish": "http://127.0.0.44:18721",
    }
    cells = tuple(
        Cell(
            f"{setup}-{page}",
            {"setup": setup, "page": page},
            f"plans/repro-lb-{'varnish' if setup == 'varnish' else 'haproxy'}-{page}.yaml",
            {"lb": url},
        )
        for page in ("static", "php")
        for setup, url in urls.items()
    )
    return Study(
        "001",
        "Locust: Apache alone, HAProxy and Varnish over two stock Apaches; static and PHP page",
        (lab,),
        cells,
        sweep={"steps": [[1000, 250], [3000, 600]], "step_s": 10, "warmup_s": 5, "repeat": 1},
        level_vars=("users", "spawn_rate"),
        generator_cpus="0",
        note="the Apache-alone cell runs the HAProxy plan with its target `lb` pointed at the lone Apache; "
        "the runs kept so far had the generator unpinned (it could use both cores); new runs pin it to CPU 0 "
        "as lab.md suggests",
    )


def _study_002() -> Study:
    labs = tuple(LabSpec(f"plans/repro-siege-{k}.lab.yaml", f"build/repro-siege-{k}") for k in ("30k", "100k", "db"))
    # scenario -> (plan, nginx's URL, Apache's URL): the lab of each scenario serves it on both
    scenarios = {
        "a": ("30k", "http://127.0.0.51:18631", "http://127.0.0.55:18631"),
        "b": ("100k", "http://127.0.0.52:18631", "http://127.0.0.56:18631"),
        "c": ("select", "http://127.0.0.53:18631", "http://127.0.0.54:18631"),
        "d": ("join", "http://127.0.0.53:18631", "http://127.0.0.54:18631"),
        "e": ("update", "http://127.0.0.53:18631", "http://127.0.0.54:18631"),
    }
    cells = tuple(
        Cell(
            f"{server}-{scenario}",
            {"server": server, "scenario": scenario},
            f"plans/repro-siege-{plan}.yaml",
            {"web": url},
        )
        for scenario, (plan, *urls) in scenarios.items()
        for server, url in zip(("nginx", "apache"), urls)
    )
    return Study(
        "002",
        "Siege: nginx and Apache, stock, each on a tenth of a core; 30 KB / 100 KB files, select, join, update",
        labs,
        cells,
        sweep={"steps": [25, 100, 255], "step_s": 4, "warmup_s": 1, "repeat": 1},
        level_vars=("clients",),
        generator_cpus="0",
        note="the paper's Apache ran on Windows XP and its (a)/(b) were scripts reading a file; ours "
        "are static files, and (e) updates every item of a category over a join, where the paper gives "
        "its query only as a conditional query over both tables that modifies rows",
    )


def _study_003() -> Study:
    lab = LabSpec("plans/repro-tsung.lab.yaml", "build/repro-tsung")

    # each server at four addresses (the lab's also_listen), one target each: server -> last octet
    def addresses(octet: int) -> dict:
        return {f"web{i}": f"http://127.0.{i - 1}.{octet}:18641" for i in range(1, 5)}

    cells = (
        Cell("apache-worker", {"server": "apache-worker"}, "plans/repro-tsung-apache-worker.yaml", addresses(61)),
        Cell("erlang", {"server": "erlang"}, "plans/repro-tsung-yaws.yaml", addresses(62)),
    )
    return Study(
        "003",
        "Tsung: Apache worker vs an Erlang server (Yaws), 2 min at 500 then 2 min at 1000 new users/s",
        (lab,),
        cells,
        sweep={},  # the plans run as written: both phases in one run, the users carried over
        level_vars=(),
        generator_cpus="0",
        # "Первая фаза – 2 минуты, 500 новых посетителей в секунду", then 2 min at 1000/s: the plans run
        # these 240 s as they are (t is the run's own second); a shortened plan would be stretched to them
        paper_test_s=240,
        local_agents=2,  # 19,000 connections per engine, under the machine's 20,000 open files per process
        note="Yaws stands in for the authors' Erlang server; the paper's phases as they were (2 min at 500, "
        "then 2 min at 1000 new users/s, both servers); sessions of about 25 s "
        "(5 loads, 5-7.5 s think) instead of the paper's 60-100 s, in proportion to this machine's 20,000 "
        "open files per process against the paper's 65,536 Erlang ports, so the server's cap falls in phase 2",
    )


def _study_004() -> Study:
    labs = (
        LabSpec("plans/repro-webbench-nfs.lab.yaml", "build/repro-webbench-nfs"),
        LabSpec("plans/repro-webbench-nfs-cto.lab.yaml", "build/repro-webbench-nfs-cto"),
    )
    # server -> the third octet of its twelve nodes' addresses in the labs
    servers = {"nginx": 4, "apache-prefork": 5, "apache-worker": 6, "nginx-reopen": 7}
    cells = tuple(
        Cell(
            server,
            {"server": server},
            "plans/repro-webbench-nfs-cto.yaml" if server == "nginx-reopen" else "plans/repro-webbench-nfs.yaml",
            {f"node{i}": f"http://127.0.{octet}.{i}:18601" for i in range(1, 13)},
        )
        for server, octet in servers.items()
    )
    return Study(
        "004",
        "WebBench: 1-12 nodes, each on 2 % of a core, on an NFS docroot; nginx and Apache prefork and worker",
        labs,
        cells,
        sweep={
            "steps": [1, 4, 16, 64],
            "step_s": 30,
            "warmup_s": 3,
            "repeat": 1,
            "servers": [1, 2, 4, 6, 8, 10, 12],
        },
        level_vars=("clients",),
        step_vars={"cpus": "servers"},
        generator_cpus="0",
        shuffle_servers=True,
        note="each node, confined to 2 % of CPU 1, stands for one of the paper's CPUs; nginx and Debian's stock "
        "Apache prefork and worker are labelled analogues of the paper's Apache 1.3.14 and 2.0.8a, not those "
        "versions; nginx-reopen opens every file over NFS (close-to-open, no open_file_cache), the others keep "
        "NFS out of the request path after the first read (nginx) or cross the FUSE mount per open (Apache); "
        "no Tomcat nodes: a JVM held to 2 % of a core did not listen within the lab's 60 s (at 5 %, its "
        "initialisation alone took 26 s and it did not listen within 60 s either)",
    )


STUDIES = {s.id: s for s in (_study_000(), _study_001(), _study_002(), _study_003(), _study_004())}


def paper_s_per_run_s(study: Study, plan: dict) -> float:
    """How many of the paper's seconds one second of a run of `plan` (as it runs) stands for (1:
    none, t is the run's own). Only the phases' lengths are scaled, not their rates: a shorter
    phase brings fewer users."""
    if study.paper_test_s is None:
        return 1.0
    return study.paper_test_s / load_s(plan)


def load_s(plan: dict) -> float:
    """The seconds of load a plan asks for: its duration, or its sweep's steps one after the other."""
    sweep = plan.get("sweep") or {}
    if not sweep.get("steps"):
        return float(plan["duration_s"])
    steps = len(sweep["steps"]) * len(sweep.get("servers", [1])) * int(sweep.get("repeat", 1))
    return steps * float(sweep["step_s"])


def level_records(study: Study, steps: list) -> list[dict]:
    """Per level of the sweep (in order), the variables it sets."""
    return [dict(zip(study.level_vars, level if isinstance(level, (list, tuple)) else [level])) for level in steps]
