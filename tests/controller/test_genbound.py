"""The generator-bound verdict's advice."""
from __future__ import annotations

from loadfleet.controller.genbound import GeneratorVerdict, is_loopback


def test_generator_advice_says_when_more_agents_on_this_host_cannot_help():
    bound = GeneratorVerdict(intervals=2, agents=("a1",), reasons=("CPU 99 %",), add_agents=1)
    assert "Add about 1 more agent(s)" in bound.describe("s1", 3)
    assert bound.describe("s1", 3).endswith("Add about 1 more agent(s) and run it again")
    assert "Add about 1 more agent(s) on other hosts" in bound.describe("s1", 3, one_host=True)
    assert [is_loopback(u) for u in ("http://127.0.0.2:8080", "http://[::1]/", "http://localhost:80",
                                     "http://10.0.0.7:8080", "http://web1:80")] == [True, True, True, False, False]
