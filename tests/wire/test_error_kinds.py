"""Every copy of the error kinds equals stats.proto's: the Python tuple, the engine's array size
and the Gatling driver's Java enum (a copy once lacked the two generator-limit kinds)."""

from __future__ import annotations

import re
from pathlib import Path

from loadfleet.v1 import stats_pb2
from loadfleet.wire.stats import ERROR_KINDS

ROOT = Path(__file__).resolve().parents[2]
PROTO_NAMES = [v.name for v in stats_pb2.ErrorKind.DESCRIPTOR.values if v.name != "ERROR_KIND_UNSPECIFIED"]


def test_the_python_tuple_is_the_proto_enum_in_order():
    assert [stats_pb2.ErrorKind.Name(k) for k in ERROR_KINDS] == PROTO_NAMES


def test_the_engines_error_array_holds_every_kind_by_its_number():
    source = (ROOT / "agent/engine/src/stats.rs").read_text()
    size = int(re.search(r"const ERROR_KINDS: usize = (\d+);", source)[1])
    redirect_index = int(re.search(r"const REDIRECT_REFUSED_INDEX: usize = (\d+);", source)[1])
    # Indexed by `kind as usize`, but for REDIRECT_REFUSED (40), kept in the last slot (error_index).
    dense = [k for k in stats_pb2.ErrorKind.values() if k != stats_pb2.ERROR_KIND_REDIRECT_REFUSED]
    assert redirect_index == size - 1 == max(dense) + 1


def test_the_gatling_drivers_enum_is_the_proto_enum_in_order():
    source = (ROOT / "agent/gatling/src/main/java/loadfleet/gatling/IntervalRecorder.java").read_text()
    body = re.search(r"enum ErrorKind \{(.*?);", source, re.S)[1]
    names = [n.strip() for n in re.sub(r"//[^\n]*", "", body).split(",")]
    assert ["ERROR_KIND_" + n for n in names] == PROTO_NAMES
