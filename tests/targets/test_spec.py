import pytest

from loadfleet.targets.spec import SpecError, parse_spec
from loadfleet.targets.workload import WorkloadSpec

WEBS = [{"name": "web1", "listen": "127.0.0.2:0"}, {"name": "web2", "kind": "apache", "listen": "127.0.0.3:0"}]


def test_a_full_spec_parses_and_orders_backends_before_balancers():
    spec = parse_spec(
        {
            "workload": {"kind": "files100k", "count": 5, "seed": 4},
            "servers": [
                {"name": "cache", "kind": "varnish", "backends": ["lb"], "cache": False, "listen": "[::1]:0"},
                {"name": "lb", "kind": "haproxy", "backends": ["web1", "web2"], "listen": "127.0.0.5:0"},
                *WEBS,
                {"name": "app", "kind": "php", "front": "apache", "cost": 50, "workers": 3, "listen": "127.0.0.4:8080"},
            ],
        }
    )
    assert spec.workload == WorkloadSpec(kind="files100k", count=5, seed=4)
    assert [s.name for s in spec.servers] == ["web1", "web2", "app", "lb", "cache"]
    cache = spec.servers[-1]
    assert (cache.kind, cache.host, cache.port, cache.backends, cache.cache) == ("varnish", "::1", 0, ("lb",), False)
    app = spec.servers[2]
    assert (app.front, app.cost, app.workers, app.port) == ("apache", 50, 3, 8080)
    assert spec.servers[1].mpm == "event"


def test_a_database_starts_before_its_php_servers_and_tls_is_an_nginx_field():
    spec = parse_spec(
        {
            "servers": [
                {"name": "shop", "kind": "php", "database": "db", "listen": "127.0.0.2:0"},
                {"name": "secure", "tls": True, "listen": "127.0.0.3:0"},
                {"name": "db", "kind": "mariadb", "seed": 7, "items": 300, "categories": 3, "listen": "127.0.0.4:0"},
            ]
        }
    )
    assert [s.name for s in spec.servers] == ["secure", "db", "shop"]
    secure, db, shop = spec.servers
    assert secure.tls and not shop.tls
    assert (db.kind, db.seed, db.items, db.categories) == ("mariadb", 7, 300, 3)
    assert shop.database == "db" and shop.needs == ("db",)


@pytest.mark.parametrize(
    "servers, field",
    [
        ([{"kind": "apache", "mpm": "threads", "listen": "127.0.0.1:0"}], "servers[0].mpm"),
        ([{"kind": "nginx", "mpm": "event", "listen": "127.0.0.1:0"}], "servers[0].mpm"),
        ([{"kind": "php", "cost": -1, "listen": "127.0.0.1:0"}], "servers[0].cost"),
        ([{"kind": "php", "front": "iis", "listen": "127.0.0.1:0"}], "servers[0].front"),
        ([{"kind": "php", "workers": 0, "listen": "127.0.0.1:0"}], "servers[0].workers"),
        ([{"kind": "haproxy", "listen": "127.0.0.1:0"}], "servers[0].backends"),
        ([*WEBS, {"kind": "haproxy", "backends": ["web3"], "listen": "127.0.0.1:0"}], "servers[2].backends"),
        (
            [*WEBS, {"name": "lb", "kind": "haproxy", "backends": ["lb"], "listen": "127.0.0.1:0"}],
            "servers[2].backends",
        ),
        (
            [*WEBS, {"kind": "varnish", "backends": ["web1"], "cache": "yes", "listen": "127.0.0.1:0"}],
            "servers[2].cache",
        ),
        ([*WEBS, {"kind": "varnish", "backends": ["web1"], "listen": "10.0.0.1:80"}], "servers[2].listen"),
        (
            [
                {"name": "a", "kind": "haproxy", "backends": ["b"], "listen": "127.0.0.1:0"},
                {"name": "b", "kind": "varnish", "backends": ["a"], "listen": "127.0.0.1:0"},
            ],
            "servers: backends form a cycle",
        ),
        ([{"listen": "127.0.0.1:80"}, {"listen": "127.0.0.1:80"}], "servers: 'web2' and 'web1' both listen"),
        ([{"name": "a b", "listen": "127.0.0.1:0"}], "servers[0].name"),
        ([{"tls": "yes", "listen": "127.0.0.1:0"}], "servers[0].tls"),
        ([{"kind": "apache", "tls": True, "listen": "127.0.0.1:0"}], "servers[0].tls"),
        (
            [
                {"name": "web1", "tls": True, "listen": "127.0.0.2:0"},
                {"kind": "haproxy", "backends": ["web1"], "listen": "127.0.0.1:0"},
            ],
            "servers[1].backends: 'web1' serves https",
        ),
        ([{"kind": "php", "database": "db", "listen": "127.0.0.1:0"}], "servers[0].database"),
        ([*WEBS, {"kind": "php", "database": "web1", "listen": "127.0.0.1:0"}], "servers[2].database"),
        ([{"kind": "php", "database": 3, "listen": "127.0.0.1:0"}], "servers[0].database"),
        (
            [
                {"name": "db", "kind": "mariadb", "listen": "127.0.0.2:0"},
                {"kind": "varnish", "backends": ["db"], "listen": "127.0.0.1:0"},
            ],
            "servers[1].backends: 'db' is a mariadb",
        ),
        ([{"kind": "mariadb", "items": 0, "listen": "127.0.0.1:0"}], "servers[0].items"),
        ([{"kind": "mariadb", "items": 5, "categories": 6, "listen": "127.0.0.1:0"}], "servers[0].categories"),
        ([{"kind": "mariadb", "seed": "x", "listen": "127.0.0.1:0"}], "servers[0].seed"),
        ([{"kind": "mariadb", "workers": 2, "listen": "127.0.0.1:0"}], "servers[0].workers"),
        ([{"kind": "nginx", "also_listen": ["127.0.0.3"], "listen": "127.0.0.2:80"}], "servers[0].also_listen"),
        ([{"kind": "yaws", "also_listen": ["10.0.0.3"], "listen": "127.0.0.2:80"}], "servers[0].also_listen"),
        (
            [{"kind": "yaws", "also_listen": ["127.0.0.3", "127.0.0.3"], "listen": "127.0.0.2:80"}],
            "servers[0].also_listen",
        ),
        ([{"kind": "apache", "also_listen": ["127.0.0.3"], "listen": "127.0.0.2:0"}], "servers[0].also_listen: only"),
        (
            [
                {"name": "a", "kind": "apache", "also_listen": ["127.0.0.3"], "listen": "127.0.0.2:80"},
                {"name": "b", "kind": "nginx", "listen": "127.0.0.3:80"},
            ],
            "servers: 'b' and 'a' both listen on 127.0.0.3:80",
        ),
    ],
)
def test_bad_servers_are_named_by_field(servers, field):
    with pytest.raises(SpecError) as error:
        parse_spec({"servers": servers})
    assert any(p.startswith(field) for p in error.value.problems), error.value.problems


@pytest.mark.parametrize(
    "workload, field",
    [
        ({"kind": "zip"}, "workload.kind"),
        ({"kind": "single", "bytes": 0}, "workload.bytes"),
        ({"kind": "single", "scale": 2}, "workload.scale"),
        ({"kind": "files30k", "count": "many"}, "workload.count"),
        ({"kind": "tree", "count": 3}, "workload.count"),
        ({"seed": 1.5}, "workload.seed"),
    ],
)
def test_bad_workloads_are_named_by_field(workload, field):
    with pytest.raises(SpecError) as error:
        parse_spec({"workload": workload, "servers": WEBS})
    assert any(p.startswith(field) for p in error.value.problems), error.value.problems


def test_every_problem_is_reported_at_once():
    with pytest.raises(SpecError) as error:
        parse_spec(
            {
                "workload": {"kind": "single", "bytes": -1},
                "servers": [{"kind": "apache", "mpm": "x", "listen": "8.8.8.8:80"}, {"kind": "iis"}],
            }
        )
    fields = sorted(p.split(":")[0] for p in error.value.problems)
    assert fields == ["servers[0].listen", "servers[0].mpm", "servers[1].kind", "workload.bytes"]


def test_apache_and_yaws_may_listen_on_more_loopback_addresses_at_their_port():
    spec = parse_spec(
        {"servers": [{"name": "erlang", "kind": "yaws", "listen": "127.0.0.62:18641", "also_listen": ["127.0.0.63"]}]}
    )
    assert spec.servers[0].also_listen == ("127.0.0.63",)
