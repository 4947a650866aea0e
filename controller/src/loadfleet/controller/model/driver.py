"""What produces a plan's load on the agents: the native engine, or Gatling (docs/gatling.md)."""

from __future__ import annotations

import enum


class Driver(enum.StrEnum):
    ENGINE = "engine"  # loadfleet's engine (agent/engine)
    GATLING = "gatling"  # a Gatling JVM per agent


DEFAULT_DRIVER = Driver.ENGINE  # what a plan without `driver` runs on
