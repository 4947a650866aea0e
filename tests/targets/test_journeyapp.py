"""The journeys lab app (issue 30) from a client's side, and the rows it leaves in its database:
the login form's CSRF token per session, the session cookie, 403 for a bad token, 401 for a bad
password, the account page, the cart's rows per user; its spec and its command line."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from loadfleet.targets.daemon import pid_alive
from loadfleet.targets.journeyapp import DATABASE, MAX_ITEM, MAX_USERS, JourneyApp, seed_sql, user_name, user_password
from loadfleet.targets.journeylab import JourneyLab, load_journey_spec, main, parse_journey_spec
from loadfleet.targets.mariadb import MariaDbServer
from loadfleet.targets.spec import SpecError

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
USERS = 20
TOKEN = re.compile(r'<input type="hidden" name="csrf" value="([0-9a-f]{32})">')


def spec_doc(*, app: dict | None = None, db_listen: str = "127.0.0.72:0") -> dict:
    return {
        "workload": {"kind": "single"},
        "servers": [
            {"name": "db", "kind": "mariadb", "items": 1, "categories": 1, "listen": db_listen},
            {"name": "app", "kind": "journey", "database": "db", "workers": 2, "users": USERS, "listen": "127.0.0.73:0"}
            | (app or {}),
        ],
    }


@pytest.fixture(scope="module")
def lab(module_open_dir):
    with JourneyLab(parse_journey_spec(spec_doc()), module_open_dir / "lab") as running:
        yield running


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: str


@dataclass
class Browser:
    """One user: an HTTP/1.1 connection and the cookies the app set (no redirect followed)."""

    url: str
    cookies: dict[str, str] = field(default_factory=dict)

    def request(self, method: str, path: str, form: dict[str, str] | None = None) -> Response:
        parts = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}
        body = urllib.parse.urlencode(form) if form is not None else None
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            result = Response(response.status, response.headers, response.read().decode())
        finally:
            conn.close()
        for line in result.headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(line).items():
                self.cookies[name] = morsel.value
        return result

    def token(self) -> str:
        page = self.request("GET", "/login.php")
        assert page.status == 200, page.body
        found = TOKEN.search(page.body)
        assert found, page.body
        return found.group(1)

    def login(self, n: int, *, token: str | None = None, password: str | None = None) -> Response:
        csrf = self.token() if token is None else token
        form = {"user": user_name(n), "password": user_password(n) if password is None else password, "csrf": csrf}
        return self.request("POST", "/login.php", form)


def test_the_login_form_has_a_token_per_session_and_sets_an_httponly_session_cookie(lab):
    alice, bob = Browser(lab.app.url), Browser(lab.app.url)
    page = alice.request("GET", "/login.php")
    assert page.status == 200 and 'name="user"' in page.body and 'name="password"' in page.body
    cookie = page.headers["Set-Cookie"]
    assert cookie.startswith("PHPSESSID=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    first = TOKEN.search(page.body).group(1)
    assert alice.token() == first  # the same session keeps its token
    assert bob.token() != first  # another session has its own


def test_a_login_redirects_to_the_account_page_with_a_new_session_id(lab):
    user = Browser(lab.app.url)
    token = user.token()
    before = user.cookies["PHPSESSID"]
    response = user.login(3, token=token)
    assert (response.status, response.headers["Location"]) == (302, "/account.php")
    assert user.cookies["PHPSESSID"] != before  # no session fixation: the id changes at login
    account = user.request("GET", "/account.php")
    assert account.status == 200 and "Welcome, user3" in account.body, account.body
    assert 'data-cart-items="0"' in account.body
    # The session of before the login is gone, not logged in.
    stale = Browser(lab.app.url, {"PHPSESSID": before}).request("GET", "/account.php")
    assert (stale.status, stale.headers["Location"]) == (302, "/login.php")


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("", id="missing"),
        pytest.param("0" * 32, id="wrong"),
        pytest.param(None, id="another session's"),
    ],
)
def test_a_bad_token_is_403_bad_token_and_logs_nobody_in(lab, token):
    user = Browser(lab.app.url)
    user.token()  # the user's own session has a token; the one sent is not it
    sent = Browser(lab.app.url).token() if token is None else token
    response = user.login(4, token=sent)
    assert (response.status, response.body) == (403, "bad token\n")
    assert user.request("GET", "/account.php").status == 302


def test_a_post_without_a_session_is_403_bad_token(lab):
    response = Browser(lab.app.url).request("POST", "/login.php", {"user": "user1", "password": "pw1", "csrf": "x"})
    assert (response.status, response.body) == (403, "bad token\n")


@pytest.mark.parametrize(
    ("n", "password"),
    [(5, "pw6"), (5, ""), (USERS, f"pw{USERS}")],  # a wrong password; none; an account not seeded
    ids=["wrong password", "no password", "unknown user"],
)
def test_a_bad_password_is_401(lab, n, password):
    user = Browser(lab.app.url)
    response = user.login(n, password=password)
    assert (response.status, response.body) == (401, "bad user or password\n")
    assert user.request("GET", "/account.php").status == 302


def test_the_cart_adds_a_row_per_post_for_its_user_as_the_database_shows(lab):
    users = {n: Browser(lab.app.url) for n in (7, 8)}
    for n, user in users.items():
        assert user.login(n).status == 302
    counts = [json.loads(users[7].request("POST", "/cart.php", {"item": str(i)}).body) for i in (1, 2, 3)]
    assert counts == [{"items": 1}, {"items": 2}, {"items": 3}]
    assert json.loads(users[8].request("POST", "/cart.php", {"item": str(MAX_ITEM)}).body) == {"items": 1}
    rows = lab.app.cart_rows()
    assert (rows["user7"], rows["user8"]) == (3, 1)
    assert 'data-cart-items="3"' in users[7].request("GET", "/account.php").body
    sql = "SELECT c.item FROM cart c JOIN users u ON u.id = c.user_id WHERE u.name = 'user7'"
    items = lab.database.query(sql, database=DATABASE)
    assert sorted(int(r[0]) for r in items) == [1, 2, 3]


@pytest.mark.parametrize("item", ["0", str(MAX_ITEM + 1), "x", ""])
def test_a_bad_item_is_400_and_adds_no_row(lab, item):
    user = Browser(lab.app.url)
    assert user.login(9).status == 302
    response = user.request("POST", "/cart.php", {"item": item})
    assert response.status == 400 and f"1 to {MAX_ITEM}" in json.loads(response.body)["error"]
    assert "user9" not in lab.app.cart_rows()


def test_without_a_login_the_account_redirects_and_the_cart_is_401(lab):
    anonymous = Browser(lab.app.url)
    account = anonymous.request("GET", "/account.php")
    assert (account.status, account.headers["Location"]) == (302, "/login.php")
    cart = anonymous.request("POST", "/cart.php", {"item": "1"})
    assert (cart.status, json.loads(cart.body)) == (401, {"error": "not logged in"})
    assert cart.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/", 302),
        ("GET", "/journey.php", 404),  # the shared code, never served or run alone
        ("GET", "/config.php", 404),  # the database's password
        ("GET", "/cart.php", 405),
        ("PUT", "/login.php", 405),
        ("POST", "/account.php", 405),
    ],
)
def test_only_the_pages_answer_and_each_only_its_methods(lab, method, path, status):
    response = Browser(lab.app.url).request(method, path, {} if method != "GET" else None)
    assert response.status == status
    assert "JR_DB_PASSWORD" not in response.body and "<?php" not in response.body


def test_the_database_account_of_the_pages_may_only_read_accounts_and_add_to_carts(lab):
    grants = " ".join(row[0] for row in lab.database.query("SHOW GRANTS FOR 'journey'@'%'"))
    assert "SELECT ON `journey`.`users`" in grants and "SELECT, INSERT ON `journey`.`cart`" in grants
    assert "UPDATE" not in grants and "DELETE" not in grants and "ALL PRIVILEGES" not in grants


def test_seeded_accounts_are_the_same_at_every_start_and_bounded():
    assert seed_sql(3) == seed_sql(3) and seed_sql(3) != seed_sql(4)
    assert "'user2'" in seed_sql(3) and "'user3'" not in seed_sql(3)
    db = MariaDbServer("127.0.0.1", 1, Path("unused"), "db")
    for users in (0, MAX_USERS + 1):
        with pytest.raises(ValueError, match=f"users {users} must be from 1 to {MAX_USERS}"):
            JourneyApp("127.0.0.1", 1, Path("unused"), "app", database=db, users=users)
    with pytest.raises(ValueError, match="workers 0 must be from 1 to 256"):
        JourneyApp("127.0.0.1", 1, Path("unused"), "app", database=db, workers=0)


def test_the_checked_in_spec_puts_the_app_where_the_journey_plan_expects_it():
    spec = load_journey_spec(ROOT / "targets/specs/journey.yaml")
    assert (spec.app.host, spec.app.port, spec.app.users, spec.database.name) == (
        "127.0.0.1",
        18801,
        1000,
        "journey-db",
    )
    assert "http://127.0.0.1:18801" in (ROOT / "plans/journey-login.yaml").read_text()


@pytest.mark.parametrize(
    ("app", "problem"),
    [
        ({"users": 0}, f"servers[1].users: 0 must be an integer from 1 to {MAX_USERS}"),
        ({"workers": "4"}, "servers[1].workers: '4' must be an integer from 1 to 256"),
        ({"database": "nope"}, "servers[1].database: 'nope' must name the spec's mariadb server"),
        ({"cost": 5}, "servers[1].cost: not a field of kind journey"),
        ({"listen": "10.0.0.1:80"}, "servers[1].listen"),
        ({"listen": "127.0.0.72:3306"}, "both listen on 127.0.0.72:3306"),
    ],
)
def test_a_bad_spec_names_the_field(app, problem):
    with pytest.raises(SpecError) as caught:
        parse_journey_spec(spec_doc(app=app, db_listen="127.0.0.72:3306"))
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_a_spec_without_exactly_one_journey_server_is_refused():
    doc = spec_doc()
    doc["servers"].append(dict(doc["servers"][1], name="app2"))
    with pytest.raises(SpecError, match="exactly one server of kind journey, not 2"):
        parse_journey_spec(doc)


def test_the_command_line_brings_the_lab_up_prints_rows_and_stops_it(open_dir, capsys):
    spec = open_dir / "journey.yaml"
    spec.write_text(json.dumps(spec_doc()))  # JSON is YAML
    state = open_dir / "state"
    assert main(["up", str(spec), "--state-dir", str(state)]) == 0
    url = re.search(r"app: (http://\S+)", capsys.readouterr().out).group(1)
    recorded = json.loads((state / "journey.json").read_text())
    try:
        assert main(["up", str(spec), "--state-dir", str(state)]) == 1  # already up
        user = Browser(url)
        assert user.login(2).status == 302
        user.request("POST", "/cart.php", {"item": "5"})
        capsys.readouterr()
        assert main(["rows", "--state-dir", str(state)]) == 0
        assert capsys.readouterr().out == "user2 1\n"
    finally:
        assert main(["down", "--state-dir", str(state)]) == 0
    assert recorded["url"] == url and not any(pid_alive(p) for p in recorded["pids"])
    assert main(["rows", "--state-dir", str(state)]) == 1  # nothing up


def test_a_restart_starts_afresh_no_cart_rows_and_no_sessions_of_before(open_dir):
    spec = parse_journey_spec(spec_doc())
    with JourneyLab(spec, open_dir) as first:
        user = Browser(first.app.url)
        assert user.login(1).status == 302
        user.request("POST", "/cart.php", {"item": "1"})
        assert first.app.cart_rows() == {"user1": 1}
    with JourneyLab(spec, open_dir) as again:
        user.url = again.app.url
        assert again.app.cart_rows() == {}
        assert not list(again.app.session_dir.iterdir())
        account = user.request("GET", "/account.php")  # the cookie of before names no session now
        assert (account.status, account.headers["Location"]) == (302, "/login.php")
