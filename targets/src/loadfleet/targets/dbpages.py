"""Database-backed PHP pages, the file/database scenarios servers are compared with: served
by a `PhpServer` (PHP-FPM, mysqli) from a `MariaDbServer` of the lab (see mariadb.py).

    /item.php?id=N        one row of one table, by primary key
    /category.php?id=N    a join: the category's name and its first 50 items
    /update.php?id=N      a write: items.hits + 1 for one row (autocommit)
    /category-update.php?id=N
                          a write over both tables: items.hits + 1 for every item of the
                          category (a join UPDATE, one transaction); requests for the same
                          category wait on each other's row locks

Without `?id=` each request picks a random row, so load spreads over the table; an id out of
range or not a number is a 400. Each table row of a page is `<tr><td>col</td>...</tr>` in the
query's column order, so a test can compare a page with the database. Responses carry
`Cache-Control: no-store`; a database error is a 503 naming it.
"""

from __future__ import annotations

from pathlib import Path

from .mariadb import DATABASE, PASSWORD, USER, MariaDbServer

ITEM_PAGE, CATEGORY_PAGE, UPDATE_PAGE = "/item.php", "/category.php", "/update.php"
CATEGORY_UPDATE_PAGE = "/category-update.php"
DB_PAGES = (ITEM_PAGE, CATEGORY_PAGE, UPDATE_PAGE, CATEGORY_UPDATE_PAGE)
CATEGORY_ITEMS = 50
# The queries, also for tests that check a page against the database.
ITEM_SQL = "SELECT id, category_id, name, price_cents, stock FROM items WHERE id = ?"
CATEGORY_SQL = (
    "SELECT i.id, i.name, i.price_cents FROM items i JOIN categories c ON c.id = i.category_id "
    f"WHERE c.id = ? ORDER BY i.id LIMIT {CATEGORY_ITEMS}"
)
UPDATE_SQL = "UPDATE items SET hits = hits + 1 WHERE id = ?"
CATEGORY_UPDATE_SQL = "UPDATE items i JOIN categories c ON c.id = i.category_id SET i.hits = i.hits + 1 WHERE c.id = ?"

_COMMON = """<?php
// Written by the lab: where the database is, and what every page shares.
const LF_ITEMS = %(items)d;
const LF_CATEGORIES = %(categories)d;

function lf_db(): mysqli {
    // One connection object per request, alive until the request ends: a statement that
    // outlived its (persistent) connection object aborted the PHP-FPM child (SIGABRT).
    static $db = null;
    if ($db === null) {
        mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        // p: a persistent connection per PHP-FPM child; a connection per request would leave
        // a TIME_WAIT socket each and run out of loopback ports under load.
        $db = new mysqli('p:%(host)s', '%(user)s', '%(password)s', '%(database)s', %(port)d);
    }
    return $db;
}

function lf_id(int $max): int {
    if (!isset($_GET['id'])) {
        return mt_rand(1, $max);
    }
    $id = (string)$_GET['id'];
    if (!ctype_digit($id) || (int)$id < 1 || (int)$id > $max) {
        http_response_code(400);
        echo "id must be an integer from 1 to $max\\n";
        exit;
    }
    return (int)$id;
}

function lf_rows(mysqli_result $result): string {
    $html = '';
    while ($row = $result->fetch_row()) {
        $html .= '<tr><td>' . implode('</td><td>', array_map('htmlspecialchars', $row)) . "</td></tr>\\n";
    }
    return $html;
}

function lf_query(string $sql, int $id): mysqli_stmt {
    $stmt = lf_db()->prepare($sql);
    $stmt->bind_param('i', $id);
    $stmt->execute();
    return $stmt;
}

set_exception_handler(function (Throwable $e) {
    http_response_code(503);
    echo 'database error: ', htmlspecialchars($e->getMessage()), "\\n";
});
header('Cache-Control: no-store');
"""

_ITEM = """<?php
require __DIR__ . '/db.php';
$id = lf_id(LF_ITEMS);
$rows = lf_rows(lf_query('%(sql)s', $id)->get_result());
if ($rows === '') {
    http_response_code(404);
}
echo "<!DOCTYPE html>\\n<html><head><title>item $id</title></head><body>\\n<table id=\\"item\\">\\n$rows</table>\\n</body></html>\\n";
"""

_CATEGORY = """<?php
require __DIR__ . '/db.php';
$id = lf_id(LF_CATEGORIES);
$name = lf_query('SELECT name FROM categories WHERE id = ?', $id)->get_result()->fetch_row()[0];
$rows = lf_rows(lf_query('%(sql)s', $id)->get_result());
echo "<!DOCTYPE html>\\n<html><head><title>category $id</title></head><body>\\n",
     '<h1 id="category">', htmlspecialchars($name), "</h1>\\n<table id=\\"items\\">\\n$rows</table>\\n</body></html>\\n";
"""

_UPDATE = """<?php
require __DIR__ . '/db.php';
$id = lf_id(%(max)s);
$updated = lf_query('%(sql)s', $id)->affected_rows;
echo "<!DOCTYPE html>\\n<html><head><title>update $id</title></head><body>\\n",
     "<p id=\\"updated\\">$updated</p>\\n</body></html>\\n";
"""


def write_db_pages(app: Path, database: MariaDbServer) -> None:
    """Writes db.php (connection and helpers) and the pages into `app`."""
    (app / "db.php").write_text(
        _COMMON
        % {
            "host": f"[{database.host}]" if ":" in database.host else database.host,
            "port": database.port,
            "user": USER,
            "password": PASSWORD,
            "database": DATABASE,
            "items": database.items,
            "categories": database.categories,
        }
    )
    for page, source, sql, ids in (
        (ITEM_PAGE, _ITEM, ITEM_SQL, "LF_ITEMS"),
        (CATEGORY_PAGE, _CATEGORY, CATEGORY_SQL, "LF_CATEGORIES"),
        (UPDATE_PAGE, _UPDATE, UPDATE_SQL, "LF_ITEMS"),
        (CATEGORY_UPDATE_PAGE, _UPDATE, CATEGORY_UPDATE_SQL, "LF_CATEGORIES"),
    ):
        (app / page.lstrip("/")).write_text(source % {"sql": sql, "max": ids})


__all__ = [
    "CATEGORY_PAGE",
    "CATEGORY_SQL",
    "CATEGORY_UPDATE_PAGE",
    "CATEGORY_UPDATE_SQL",
    "DB_PAGES",
    "ITEM_PAGE",
    "ITEM_SQL",
    "UPDATE_PAGE",
    "write_db_pages",
]
