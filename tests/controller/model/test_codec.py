"""The journal's codec: a field flagged OMIT_DEFAULT is left out while it holds its default (a
plain run's journal is the same bytes as before the field existed) and read back alike."""

from loadfleet.controller.fleet.scheduler import EngineShare, ScenarioShare
from loadfleet.controller.model.codec import from_doc, to_doc
from loadfleet.controller.model.load import Load, LoadModel


def test_an_empty_scenarios_field_is_left_out_and_read_back_as_empty():
    share = EngineShare(Load(LoadModel.CLOSED, clients=3), max_requests=10, first_user=4)
    doc = to_doc(share)
    assert "scenarios" not in doc and doc["max_requests"] == 10
    assert from_doc(EngineShare, doc) == share


def test_a_share_with_scenarios_keeps_them():
    scenario = ScenarioShare(Load(LoadModel.CLOSED, clients=2))
    share = EngineShare(Load(LoadModel.CLOSED), scenarios=(scenario, None))
    doc = to_doc(share)
    assert len(doc["scenarios"]) == 2 and doc["scenarios"][1] is None
    assert from_doc(EngineShare, doc) == share
