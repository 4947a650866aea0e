"""The gate experiment resumes only the experiment its work directory holds: a resume with
other settings (three baselines' runs gated against ten) would mix two experiments' verdicts."""

from __future__ import annotations

import argparse

from bench.gate.aa_ab import GATES, settings_mismatch


def args_of(baselines: int = 3, duration_s: int = 30) -> argparse.Namespace:
    return argparse.Namespace(
        baselines=baselines, duration_s=duration_s, clients=8, base_delay_ms=3, slowdown_ms=2, gate=list(GATES)
    )


def test_a_new_work_directory_records_its_settings_and_resumes_with_the_same(tmp_path):
    assert settings_mismatch(tmp_path, args_of()) == ""
    assert (tmp_path / "settings.json").exists()
    assert settings_mismatch(tmp_path, args_of()) == ""


def test_a_resume_with_other_baselines_or_durations_is_refused_naming_them(tmp_path):
    settings_mismatch(tmp_path, args_of(baselines=3))
    refused = settings_mismatch(tmp_path, args_of(baselines=10, duration_s=20))
    assert "baselines 3 -> 10" in refused
    assert "duration_s 30 -> 20" in refused
    assert "--work" in refused
