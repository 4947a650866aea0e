"""The lab spec's `journey` kind (spec.py): the journeys app (journeyapp.py) as a lab server,
after the mariadb server it names, with its bounds and every mistake named by its field. No
process: `loadfleet-lab up` of such a spec is tested in tests/e2e/test_journeys.py."""

import pytest

from loadfleet.targets.journeyapp import DEFAULT_USERS, MAX_USERS, MAX_WORKERS
from loadfleet.targets.spec import SpecError, parse_spec

DB = {"name": "db", "kind": "mariadb", "listen": "127.0.0.4:0"}


def app(**fields: object) -> dict[str, object]:
    return {"name": "login", "kind": "journey", "database": "db", "listen": "127.0.0.5:0", **fields}


def test_a_journey_server_starts_after_its_database_with_its_accounts_and_workers():
    spec = parse_spec({"servers": [app(users=20, workers=3), DB]})
    assert [s.name for s in spec.servers] == ["db", "login"]
    login = spec.servers[1]
    assert (login.kind, login.database, login.users, login.workers, login.needs) == ("journey", "db", 20, 3, ("db",))
    assert parse_spec({"servers": [DB, app()]}).servers[1].users == DEFAULT_USERS


def test_a_journey_server_may_sit_behind_a_balancer():
    lb = {"name": "lb", "kind": "haproxy", "backends": ["login"], "listen": "127.0.0.6:0"}
    assert [s.name for s in parse_spec({"servers": [lb, app(), DB]}).servers] == ["db", "login", "lb"]


@pytest.mark.parametrize(
    "servers, field, words",
    [
        ([app(database=None)], "servers[0].database", "must be the name of a mariadb server"),
        ([{k: v for k, v in app().items() if k != "database"}], "servers[0].database", "needs the name"),
        ([app(database="web"), {"name": "web", "listen": "127.0.0.6:0"}], "servers[0].database", "not a mariadb"),
        ([app(database="nodb")], "servers[0].database", "not a mariadb server"),
        ([DB, app(users=0)], "servers[1].users", f"an integer from 1 to {MAX_USERS}"),
        ([DB, app(users=MAX_USERS + 1)], "servers[1].users", f"an integer from 1 to {MAX_USERS}"),
        ([DB, app(workers=MAX_WORKERS + 1)], "servers[1].workers", f"an integer from 1 to {MAX_WORKERS}"),
        ([DB, app(cost=5)], "servers[1].cost", "not a field of kind 'journey'"),
        (
            [DB, app(users=2, name="a"), app(name="b", listen="127.0.0.6:0")],
            "servers[2].database",
            "journey server 'a'",
        ),
        ([DB, app(users=True)], "servers[1].users", "an integer"),
    ],
)
def test_bad_journey_servers_are_named_by_field(servers, field, words):
    with pytest.raises(SpecError) as error:
        parse_spec({"servers": servers})
    assert any(p.startswith(field) and words in p for p in error.value.problems), error.value.problems


def test_a_journey_server_is_refused_on_a_lab_host():
    doc = {"hosts": {"web": {"servers": [{"kind": "journey", "database": "db"}, {"kind": "mariadb", "name": "db"}]}}}
    with pytest.raises(SpecError) as error:
        parse_spec(doc)
    assert any("runs on loopback only" in p for p in error.value.problems), error.value.problems
