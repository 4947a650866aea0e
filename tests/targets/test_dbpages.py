"""The database-backed pages under a short real load: PHP-FPM (behind nginx and behind
Apache) on the lab's MariaDB. Only 2xx; what a page shows is what the database holds; every
update request changed exactly its rows."""

import html
import re
import urllib.error
import urllib.request

import pytest

from loadfleet.targets.dbpages import (
    CATEGORY_ITEMS,
    CATEGORY_PAGE,
    CATEGORY_SQL,
    CATEGORY_UPDATE_PAGE,
    ITEM_PAGE,
    ITEM_SQL,
    UPDATE_PAGE,
)
from loadfleet.targets.lab import Lab, parse_spec

ITEMS, CATEGORIES = 2000, 20


@pytest.fixture(scope="module")
def lab(module_open_dir):
    spec = parse_spec(
        {
            "workload": {"kind": "single"},
            "servers": [
                {"name": "shop-nginx", "kind": "php", "database": "db", "workers": 2, "listen": "127.0.0.2:0"},
                {
                    "name": "shop-apache",
                    "kind": "php",
                    "front": "apache",
                    "database": "db",
                    "workers": 2,
                    "listen": "127.0.0.3:0",
                },
                {
                    "name": "db",
                    "kind": "mariadb",
                    "seed": 3,
                    "items": ITEMS,
                    "categories": CATEGORIES,
                    "listen": "127.0.0.4:0",
                },
            ],
        }
    )
    with Lab(spec, module_open_dir / "lab") as running:
        yield running


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200 and response.headers["Cache-Control"] == "no-store"
        return response.read().decode()


def table_rows(page: str) -> list[list[str]]:
    return [
        [html.unescape(cell) for cell in re.findall(r"<td>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", page)
    ]


def sql_for(query: str, value: int) -> str:
    return query.replace("?", str(value))


def shops(lab):
    return [lab.server("shop-nginx"), lab.server("shop-apache")]


def test_the_item_page_under_load_shows_the_row_of_the_database(lab, run_load):
    db = lab.server("db")
    summary = run_load([s.url for s in shops(lab)], requests=[{"path": ITEM_PAGE}], duration_s=1)
    assert only_2xx(summary), summary["total"]
    for shop in shops(lab):
        for item in (1, 777, ITEMS):
            shown = table_rows(fetch(f"{shop.url}{ITEM_PAGE}?id={item}"))
            assert shown == db.query(sql_for(ITEM_SQL, item)) and len(shown) == 1, (shop.name, item)


def test_the_category_page_under_load_shows_the_join_of_both_tables(lab, run_load):
    db = lab.server("db")
    summary = run_load([s.url for s in shops(lab)], requests=[{"path": CATEGORY_PAGE}], duration_s=1)
    assert only_2xx(summary), summary["total"]
    for shop in shops(lab):
        for category in (1, CATEGORIES):
            page = fetch(f"{shop.url}{CATEGORY_PAGE}?id={category}")
            expected = db.query(sql_for(CATEGORY_SQL, category))
            assert table_rows(page) == expected and len(expected) == CATEGORY_ITEMS, (shop.name, category)
            name = db.query(f"SELECT name FROM categories WHERE id = {category}")[0][0]
            assert f'<h1 id="category">{name}</h1>' in page


def test_every_update_request_changes_one_row(lab, run_load):
    db = lab.server("db")
    before = int(db.query("SELECT SUM(hits) FROM items")[0][0])
    summary = run_load([s.url for s in shops(lab)], requests=[{"path": UPDATE_PAGE}], duration_s=1)
    assert only_2xx(summary), summary["total"]
    requests = summary["total"]["figures"]["requests"]
    assert int(db.query("SELECT SUM(hits) FROM items")[0][0]) - before == requests > 0
    hits = int(db.query("SELECT hits FROM items WHERE id = 5")[0][0])
    assert '<p id="updated">1</p>' in fetch(f"{lab.server('shop-nginx').url}{UPDATE_PAGE}?id=5")
    assert db.query("SELECT hits FROM items WHERE id = 5") == [[str(hits + 1)]]


def test_every_category_update_changes_every_item_of_its_category(lab, run_load):
    """Items cycle through the categories, so each category holds ITEMS / CATEGORIES of them."""
    db = lab.server("db")
    per_category = ITEMS // CATEGORIES
    before = int(db.query("SELECT SUM(hits) FROM items")[0][0])
    summary = run_load([s.url for s in shops(lab)], requests=[{"path": CATEGORY_UPDATE_PAGE}], duration_s=1)
    assert only_2xx(summary), summary["total"]
    requests = summary["total"]["figures"]["requests"]
    assert int(db.query("SELECT SUM(hits) FROM items")[0][0]) - before == requests * per_category > 0
    hits = db.query("SELECT id, hits FROM items WHERE category_id = 7 ORDER BY id")
    assert f'<p id="updated">{per_category}</p>' in fetch(f"{lab.server('shop-apache').url}{CATEGORY_UPDATE_PAGE}?id=7")
    assert db.query("SELECT id, hits FROM items WHERE category_id = 7 ORDER BY id") == [
        [item, str(int(count) + 1)] for item, count in hits
    ]


@pytest.mark.parametrize("query", ["?id=0", f"?id={ITEMS + 1}", "?id=abc", "?id=-3"])
def test_an_id_out_of_range_is_a_400(lab, query):
    for shop in shops(lab):
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"{shop.url}{ITEM_PAGE}{query}", timeout=10)
        assert error.value.code == 400


def test_helpers_are_not_pages(lab):
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"{lab.server('shop-nginx').url}/db.php", timeout=10)
    assert error.value.code == 404


def only_2xx(summary: dict) -> bool:
    total = summary["total"]
    return (
        total["figures"]["requests"] > 0
        and total["figures"]["failed"] == 0
        and total["status"]["2xx"] == total["figures"]["requests"]
    )
