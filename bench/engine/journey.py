"""A journey's cost in the engine (issue 30, item 7): requests per generator CPU-second of a
journey request against the static path on the same nginx, and the engine's memory with
10,000 users each holding a cookie jar and variables.

Run:  .venv/bin/python -m bench.engine.journey [--engine PATH] [--runs 3] [--duration-s 5]

Throughput: 50 closed clients, keep-alive, the same 1 KiB JSON page (/account.json) either
static (prerendered bytes, body discarded) or as the login journey's `account` loop: `once`
GET /login sets a session cookie, then every request carries it from the user's jar, takes
two values from the body (a json_pointer and a regex: the body is captured and parsed), sends
them back in the path's template and checks the body. Static nginx files, not the lab's PHP
app: PHP would measure PHP. Runs alternate (static, journey, static, ...) and the median of
the per-run ratios journey / static is the result; goal >= GOAL_RATIO.

Memory: MEMORY_USERS closed users with a 10 s think time, each after /login holding 2 cookies
and, after the page, 4 variables of 64 B; the engine's VmHWM over the run; goal <= MEMORY_LIMIT_MB.
Results go to bench/engine/results/<date>-journey.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench.engine.bench import DEFAULT_ENGINE, THROUGHPUT_CONNECTIONS, read_proc_status, write_results
from bench.engine.generators import run_engine
from bench.engine.target import served_files
from loadfleet.v1 import job_pb2

GOAL_RATIO = 0.8
MEMORY_USERS = 10_000
MEMORY_LIMIT_MB = 300
MEMORY_THINK_MS = 10_000
DEFAULT_RUNS = 3
DEFAULT_DURATION_S = 5
PAGE = "/account.json"
# Set by /login: the session cookie (and, for the memory run, a second one).
LOGIN_CONF = """        location = /login {
            add_header Set-Cookie "sid=0123456789abcdef0123456789abcdef; Path=/; HttpOnly";
            add_header Set-Cookie "lang=en-GB-oxendict-0123456789; Path=/";
            return 200 "ok";
        }
"""


def page() -> bytes:
    """A 1 KiB JSON account page: an id (json_pointer), a cart count in markup (regex), and
    four 64-byte values for the memory run's variables."""
    doc = {
        "user": {"id": 4242, "name": "user 4242"},
        "cart": '<span data-cart-items="3">3 items</span>',
        **{f"v{i}": f"{i}" * 64 for i in range(4)},
    }
    text = json.dumps(doc)
    return (text[:-1] + ', "pad": "' + "x" * (1024 - len(text) - 11) + '"}').encode()


def _extract(var: int, **source: str) -> job_pb2.Extract:
    return job_pb2.Extract(var=var, name=f"extract v{var}", **source)


def journey(spec: job_pb2.JobSpec, *, variables: int = 2, think_ms: int = 0) -> None:
    """The static job turned into the account loop (see the module's docstring)."""
    login = job_pb2.RequestSpec(name="login", method="GET", path="/login", weight=0)
    account = job_pb2.RequestSpec(
        name="account",
        method="GET",
        path=PAGE + "?user=${v0}&items=${v1}",
        weight=1,
        extracts=[_extract(0, json_pointer="/user/id"), _extract(1, regex=r'data-cart-items=\\"(\d+)\\"')],
        checks=[job_pb2.Check(name="account page", body_contains="user 4242")],
    )
    account.extracts.extend(_extract(i, regex=f'"v{i - 2}": "([0-9]+)"') for i in range(2, variables))
    del spec.requests[:]
    spec.requests.extend([login, account])
    spec.variables.extend(f"v{i}" for i in range(variables))
    think = job_pb2.ThinkTime(fixed_ms=think_ms) if think_ms else None
    spec.session.CopyFrom(
        job_pb2.Session(
            once=[job_pb2.SessionStep(request=0)], steps=[job_pb2.SessionStep(request=1, think_after=think)]
        )
    )


def throughput(args: argparse.Namespace, url: str, work: Path) -> dict:
    runs = []
    for i in range(args.runs):
        pair = {}
        for case in ("static", "journey") if i % 2 == 0 else ("journey", "static"):
            failed = [0]  # responses that failed a check or an extraction: 0, or the journey is wrong

            def count(pid: int, report, failed=failed) -> None:
                failed[0] += sum(s.check_failed for s in report.stats)

            m = run_engine(
                args.engine,
                url,
                PAGE,
                clients=THROUGHPUT_CONNECTIONS,
                keep_alive=True,
                duration_s=args.duration_s,
                log=work / "engine.log",
                shape=journey if case == "journey" else None,
                watch=count,
            )
            pair[case] = {
                "requests": m.requests,
                "errors": m.errors,
                "check_failed": failed[0],
                "cpu_s": round(m.cpu_s, 3),
            }
            pair[case]["requests_per_cpu_s"] = round(m.requests_per_cpu_s, 1)
        pair["ratio"] = round(pair["journey"]["requests_per_cpu_s"] / pair["static"]["requests_per_cpu_s"], 4)
        print(f"run {i + 1}: {json.dumps(pair)}", flush=True)
        runs.append(pair)
    ratio = statistics.median(r["ratio"] for r in runs)
    print(f"journey / static requests per CPU-second: median {ratio:.3f} (goal >= {GOAL_RATIO})", flush=True)
    return {"runs": runs, "median_ratio": ratio, "goal_ratio": GOAL_RATIO, "meets_goal": ratio >= GOAL_RATIO}


def memory(args: argparse.Namespace, url: str, work: Path) -> dict:
    hwm_kb = [0]
    users = [0]

    check_failed = [0]

    def sample(pid: int, report) -> None:
        hwm_kb[0] = max(hwm_kb[0], read_proc_status(pid).get("VmHWM", 0))
        users[0] = max(users[0], sum(s.users for s in report.stats))
        check_failed[0] += sum(s.check_failed for s in report.stats)

    def shape(spec: job_pb2.JobSpec) -> None:
        journey(spec, variables=6, think_ms=MEMORY_THINK_MS)  # 2 of the loop, 4 of 64 B

    m = run_engine(
        args.engine,
        url,
        PAGE,
        clients=MEMORY_USERS,
        keep_alive=True,
        duration_s=max(args.duration_s, 8),
        connect_timeout_ms=10_000,
        watch=sample,
        log=work / "engine.log",
        shape=shape,
    )
    mb = round(hwm_kb[0] / 1024, 1)
    print(
        f"memory: {users[0]} users at most, VmHWM {mb} MB (goal <= {MEMORY_LIMIT_MB}), {m.requests} requests, "
        f"{m.errors} errors, {check_failed[0]} failed checks"
    )
    return {
        "users": MEMORY_USERS,
        "max_users_seen": users[0],
        "vm_hwm_mb": mb,
        "limit_mb": MEMORY_LIMIT_MB,
        "within_limit": users[0] == MEMORY_USERS and mb <= MEMORY_LIMIT_MB,
        "requests": m.requests,
        "errors": m.errors,
        "check_failed": check_failed[0],
    }


def main() -> int:
    args = parse_args()
    contents = {PAGE.lstrip("/"): page()}
    with served_files(
        "loadfleet-journey-", {}, fd_limit=MEMORY_USERS * 2 + 1000, extra_conf=LOGIN_CONF, contents=contents
    ) as (
        url,
        work,
    ):
        results = {
            "duration_s": args.duration_s,
            "clients": THROUGHPUT_CONNECTIONS,
            "throughput": throughput(args, url, work),
        }
        if not args.no_memory:
            results["memory"] = memory(args, url, work)
    write_results(results, "-journey")
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", type=Path, default=DEFAULT_ENGINE, help="loadfleet-engine binary")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--duration-s", type=float, default=DEFAULT_DURATION_S)
    parser.add_argument("--no-memory", action="store_true", help="skip the 10,000-user memory run")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
