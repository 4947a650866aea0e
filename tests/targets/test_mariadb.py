"""The lab's private MariaDB: its own datadir, socket and port, seeded the same from the same
seed at every start, stopped by PID."""

import pytest

from loadfleet.targets.daemon import LabError
from loadfleet.targets.mariadb import MariaDbServer, seed_sql
from support.procs import free_port, pid_alive


def test_the_same_seed_gives_the_same_rows_and_another_seed_others():
    assert seed_sql(3, items=200, categories=4) == seed_sql(3, items=200, categories=4)
    assert seed_sql(3, items=200, categories=4) != seed_sql(4, items=200, categories=4)


def test_a_started_server_is_seeded_afresh_and_stops_by_pid(tmp_path):
    db = MariaDbServer("127.0.0.2", free_port("127.0.0.2"), tmp_path, "db", seed=5, items=1500, categories=7)
    db.start()
    pid = db.pid
    try:
        assert db.url == f"mysql://127.0.0.2:{db.port}"
        assert db.query("SELECT COUNT(*), COUNT(DISTINCT category_id), SUM(hits) FROM items") == [["1500", "7", "0"]]
        assert db.query("SELECT COUNT(*) FROM categories") == [["7"]]
        first = db.query("SELECT * FROM items WHERE id IN (1, 750, 1500) ORDER BY id")
        db.query("UPDATE items SET hits = 9")
        db.stop()
        assert not pid_alive(pid)
        db.start()  # a restart seeds again: the writes of the earlier run are gone
        pid = db.pid
        assert db.query("SELECT * FROM items WHERE id IN (1, 750, 1500) ORDER BY id") == first
        assert db.query("SELECT SUM(hits) FROM items") == [["0"]]
        grants = " ".join(row[0] for row in db.query("SHOW GRANTS FOR 'loadfleet'@'%'"))
        assert "SELECT, UPDATE ON `loadfleet`.*" in grants and "ALL PRIVILEGES" not in grants
    finally:
        db.stop()
    assert not pid_alive(pid)
    db.stop()  # twice is fine


def test_bad_sql_and_a_taken_port_are_clear_errors(tmp_path):
    db = MariaDbServer("127.0.0.2", free_port("127.0.0.2"), tmp_path, "db", items=10, categories=2)
    db.start()
    try:
        with pytest.raises(LabError, match=r"mariadb db: .*doesn't exist"):
            db.query("SELECT * FROM no_such_table")
        second = MariaDbServer("127.0.0.2", db.port, tmp_path, "db2", items=10, categories=2)
        with pytest.raises(LabError, match="mariadb db2 cannot listen"):
            second.start()
        assert second.pid is None
    finally:
        db.stop()


def test_only_loopback_and_sane_row_counts(tmp_path):
    with pytest.raises(ValueError, match="loopback"):
        MariaDbServer("10.0.0.1", 3306, tmp_path, "db")
    with pytest.raises(ValueError, match="categories"):
        MariaDbServer("127.0.0.1", 3306, tmp_path, "db", items=2, categories=3)
