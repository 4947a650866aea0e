"""A job as an agent receives it: the controller's assignment (its plan, its engines' shares
and the agent's place in the run) as the JobSpec of job.proto, and a changed share (Adjust).
What agents say back is read by convert.py."""

from __future__ import annotations

from loadfleet.controller.fleet.jobs import JobAssignment
from loadfleet.controller.fleet.scheduler import EngineShare, combine
from loadfleet.controller.model.driver import Driver
from loadfleet.controller.model.load import Load, LoadModel, Think, ThinkKind
from loadfleet.controller.plan.feeds import Feed
from loadfleet.controller.plan.model import Session, SessionStep, Target
from loadfleet.controller.plan.scenarios import Scenario
from loadfleet.controller.rpc.feedwire import add_feed, feed_blocks
from loadfleet.controller.rpc.journeyconvert import add_journey
from loadfleet.controller.rpc.targetconvert import target_to_proto
from loadfleet.v1 import agent_pb2, job_pb2

_DRIVERS = {Driver.ENGINE: job_pb2.DRIVER_ENGINE, Driver.GATLING: job_pb2.DRIVER_GATLING}


def assignment_to_proto(a: JobAssignment) -> agent_pb2.ControllerMessage:
    return agent_pb2.ControllerMessage(
        assignment=agent_pb2.Assignment(
            spec=_job_spec(a),
            engines=adjust_to_proto(a.job_id, a.engines).adjust.engines,
            lease_ms=round(a.plan.agents.lease_s * 1000),
        )
    )


def _job_spec(a: JobAssignment) -> job_pb2.JobSpec:
    plan = a.plan
    spec = job_pb2.JobSpec(
        job_id=a.job_id,
        connect_timeout_ms=plan.connect_timeout_ms,
        request_timeout_ms=plan.request_timeout_ms,
        load=load_to_proto(combine([e.load for e in a.engines])),
        start_at_ms=a.start_at_ms,
        duration_ms=int(plan.duration_s * 1000),
        interval_ms=plan.interval_ms,
        max_requests=sum(e.max_requests for e in a.engines),
        driver=_DRIVERS[plan.driver],
        # The agent's first user: its engines' users are numbered on from here (scheduler.py).
        first_user=a.engines[0].first_user if a.engines else 0,
        agent_index=a.agent_index,  # ${agent} (fleet/jobs.py)
    )
    if plan.gatling:
        spec.gatling.CopyFrom(
            job_pb2.GatlingOptions(
                project=plan.gatling.project, simulation=plan.gatling.simulation, html_report=plan.gatling.html_report
            )
        )
    if plan.scenarios:
        spec.scenarios.extend(_scenario_spec(a, index, scenario) for index, scenario in enumerate(plan.scenarios))
    else:
        (implicit,) = plan.each_scenario()
        _add_workload(spec, implicit, plan.targets)
    add_feed(spec, plan.feed, a.feed_rows)
    return spec


def _add_workload(spec: job_pb2.JobSpec, scenario: Scenario, plan_targets: tuple[Target, ...]) -> None:
    """A scenario's targets, requests, session and journey into `spec` (the job's own, or a
    ScenarioSpec's nested one)."""
    spec.targets.extend(target_to_proto(t) for t in scenario.targets_of(plan_targets))
    spec.requests.extend(
        job_pb2.RequestSpec(
            name=r.name,
            method=r.method,
            path=r.path,
            weight=r.weight,
            headers=[job_pb2.Header(name=k, value=v) for k, v in r.headers],
            body=r.body.encode(),
        )
        for r in scenario.requests
    )
    spec.keep_alive = scenario.keep_alive
    spec.tls_verify = scenario.tls_verify
    if scenario.session:
        spec.session.CopyFrom(_session(scenario.session, [r.name for r in scenario.requests]))
    add_journey(spec, scenario.requests, scenario.cookies)


def _scenario_spec(a: JobAssignment, index: int, scenario: Scenario) -> job_pb2.ScenarioSpec:
    """One scenario of the job: its workload, and this agent's share of its load (the agent
    gives each engine its own from EngineShare.scenarios; with none here, the scenario's model,
    which the agent runs at level 0). Timeouts, interval and barrier are the outer spec's."""
    shares = [s for e in a.engines if (s := e.scenarios[index]) is not None]
    job = job_pb2.JobSpec(
        load=load_to_proto(combine([s.load for s in shares]) if shares else scenario.load),
        max_requests=sum(s.max_requests for s in shares),
        first_user=shares[0].first_user if shares else 0,
        # from its start to its end (its own duration, else the run's or step's end)
        duration_ms=round((scenario.end_s(a.plan.duration_s) - scenario.start_after_s) * 1000),
    )
    _add_workload(job, scenario, a.plan.targets)
    return job_pb2.ScenarioSpec(name=scenario.name, job=job, start_after_ms=round(scenario.start_after_s * 1000))


def _session(session: Session, names: list[str]) -> job_pb2.Session:
    """The plan's session, each step naming its request by its index in the JobSpec."""

    def steps(walk: tuple[SessionStep, ...]) -> list[job_pb2.SessionStep]:
        return [job_pb2.SessionStep(request=names.index(s.request), think_after=think_to_proto(s.think)) for s in walk]

    return job_pb2.Session(steps=steps(session.steps), repeat=session.repeat, once=steps(session.once))


def adjust_to_proto(
    job_id: str, engines: tuple[EngineShare, ...], feed: Feed | None = None
) -> agent_pb2.ControllerMessage:
    return agent_pb2.ControllerMessage(
        adjust=agent_pb2.Adjust(
            job_id=job_id,
            load=load_to_proto(combine([e.load for e in engines])),
            engines=[engine_share_to_proto(e, feed) for e in engines],
        )
    )


def engine_share_to_proto(e: EngineShare, feed: Feed | None = None) -> agent_pb2.EngineShare:
    """An engine's share; with scenarios, its share of each (a scenario it has none of is absent:
    idle there); the rows of the plan's unique `feed` handed to it with their cells."""
    return agent_pb2.EngineShare(
        feed_added=feed_blocks(feed, e.feed_added) if feed else [],
        load=load_to_proto(e.load),
        max_requests=e.max_requests,
        scenarios=[
            agent_pb2.ScenarioShare(
                scenario=index, load=load_to_proto(s.load), max_requests=s.max_requests, first_user=s.first_user
            )
            for index, s in enumerate(e.scenarios)
            if s is not None
        ],
    )


def think_to_proto(think: Think) -> job_pb2.ThinkTime:
    if think.kind is ThinkKind.UNIFORM:
        return job_pb2.ThinkTime(uniform=job_pb2.UniformThink(min_ms=think.ms, max_ms=think.max_ms))
    if think.kind is ThinkKind.EXPONENTIAL:
        return job_pb2.ThinkTime(exponential_mean_ms=think.ms)
    return job_pb2.ThinkTime(fixed_ms=think.ms)


def load_to_proto(load: Load) -> job_pb2.LoadShare:
    share = job_pb2.LoadShare(
        stages=[job_pb2.Stage(duration_ms=round(s.duration_s * 1000), target=s.target) for s in load.stages]
    )
    if load.model is LoadModel.CLOSED:
        share.closed.CopyFrom(job_pb2.ClosedModel(clients=load.clients, think=think_to_proto(load.think)))
    elif load.model is LoadModel.OPEN:
        share.open.CopyFrom(
            job_pb2.OpenModel(rate_per_s=load.rate, poisson=load.poisson, max_connections=load.max_connections)
        )
    else:
        share.users.CopyFrom(
            job_pb2.UsersModel(users=load.users, spawn_rate_per_s=load.spawn_rate, think=think_to_proto(load.think))
        )
    return share
