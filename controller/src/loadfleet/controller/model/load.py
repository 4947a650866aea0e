"""The load a plan asks for, and its exact split over engine slots.

Models: closed (N clients), open (a rate, evenly spaced or Poisson), users (a population
growing at a spawn rate). Closed and open loads may ramp through stages. The split keeps
every total exact: clients, users, connections and request budgets are split into whole
parts that add up (largest remainder); rates and spawn rates are split in proportion.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from typing import Any


class LoadModel(enum.StrEnum):
    CLOSED = "closed"  # N clients, each sending its next request when the last one ended
    OPEN = "open"  # requests due at a rate, whatever the servers do
    USERS = "users"  # a population growing at a spawn rate


MODELS = tuple(m.value for m in LoadModel)


class ThinkKind(enum.StrEnum):
    FIXED = "fixed"  # always `ms`
    UNIFORM = "uniform"  # between `ms` and `max_ms`
    EXPONENTIAL = "exponential"  # of mean `ms`


@dataclass(frozen=True)
class Think:
    """Think time: fixed, uniform(min, max) or exponential(mean), in ms."""

    kind: ThinkKind = ThinkKind.FIXED
    ms: int = 0  # fixed value, uniform minimum or exponential mean
    max_ms: int = 0  # uniform maximum

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ThinkKind(self.kind))  # "uniform" reads as ThinkKind.UNIFORM

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None, fixed_ms: int = 0) -> Think:
        if not doc:
            return cls(ThinkKind.FIXED, fixed_ms)
        if "uniform_ms" in doc:
            low, high = doc["uniform_ms"]
            return cls(ThinkKind.UNIFORM, low, high)
        if "exponential_ms" in doc:
            return cls(ThinkKind.EXPONENTIAL, doc["exponential_ms"])
        return cls(ThinkKind.FIXED, doc.get("fixed_ms", 0))

    def to_doc(self) -> dict[str, Any]:
        docs: dict[ThinkKind, dict[str, Any]] = {
            ThinkKind.FIXED: {"fixed_ms": self.ms},
            ThinkKind.UNIFORM: {"uniform_ms": [self.ms, self.max_ms]},
            ThinkKind.EXPONENTIAL: {"exponential_ms": self.ms},
        }
        return docs[self.kind]


@dataclass(frozen=True)
class Stage:
    duration_s: float
    target: float


@dataclass(frozen=True)
class Load:
    model: LoadModel
    clients: int = 0
    rate: float = 0.0
    poisson: bool = False
    max_connections: int = 0  # open model; 0: the engine's default
    users: int = 0
    spawn_rate: float = 0.0
    think: Think = Think()
    stages: tuple[Stage, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", LoadModel(self.model))  # "closed" reads as LoadModel.CLOSED

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Load:
        return cls(
            model=LoadModel(doc["model"]),
            clients=doc.get("clients", 0),
            rate=float(doc.get("rate", 0)),
            poisson=doc.get("poisson", False),
            max_connections=doc.get("max_connections", 0),
            users=doc.get("users", 0),
            spawn_rate=float(doc.get("spawn_rate", 0)),
            think=Think.from_doc(doc.get("think"), doc.get("think_time_ms", 0)),
            stages=tuple(Stage(float(s["duration_s"]), float(s["target"])) for s in doc.get("stages", [])),
        )

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"model": self.model.value}
        if self.model is LoadModel.CLOSED:
            doc["clients"] = self.clients
        elif self.model is LoadModel.OPEN:
            doc.update(rate=self.rate, poisson=self.poisson)
            if self.max_connections:
                doc["max_connections"] = self.max_connections
        else:
            doc["users"] = self.users
            if self.spawn_rate:  # none: each of a sweep's steps has its own
                doc["spawn_rate"] = self.spawn_rate
        if self.model is not LoadModel.OPEN and self.think != Think():
            doc["think"] = self.think.to_doc()
        if self.stages:
            doc["stages"] = [{"duration_s": s.duration_s, "target": s.target} for s in self.stages]
        return doc

    @property
    def peak(self) -> float:
        """The highest level the load reaches: clients, requests/s or users."""
        start = {LoadModel.CLOSED: self.clients, LoadModel.OPEN: self.rate, LoadModel.USERS: self.users}[self.model]
        return max([float(start), *(s.target for s in self.stages)])

    def describe(self) -> str:
        level = {
            LoadModel.CLOSED: f"{self.clients} clients",
            LoadModel.OPEN: f"{self.rate:g}/s",
            LoadModel.USERS: f"{self.users} users at {self.spawn_rate:g}/s",
        }[self.model]
        if self.stages:
            level += " → " + " → ".join(f"{s.target:g} in {s.duration_s:g} s" for s in self.stages)
        return level

    def part(self, weight: int, total_weight: int, whole: dict[str, int]) -> Load:
        """This load's share for one engine slot: whole-numbered fields from `whole`
        (already split exactly), rates in proportion."""
        f = weight / total_weight
        return replace(
            self,
            clients=whole.get("clients", 0),
            users=whole.get("users", 0),
            max_connections=whole.get("max_connections", 0),
            rate=self.rate * f,
            spawn_rate=self.spawn_rate * f,
            stages=tuple(Stage(s.duration_s, s.target * f) for s in self.stages),
        )


# No load at all: the plan-level load of a plan whose scenarios each hold their own
# (plan/scenarios.py), so a reader of `plan.load` missed there sees no load and fails loudly.
IDLE_LOAD = Load(LoadModel.CLOSED)


def split_exact(total: int, weights: list[int]) -> list[int]:
    """Splits `total` into whole parts proportional to `weights`, summing to `total`.

    Ties in the remainders go to the earlier weight, so the result is deterministic.
    """
    if not weights or sum(weights) <= 0:
        raise ValueError("split_exact needs at least one positive weight")
    weight_sum = sum(weights)
    exact = [total * w / weight_sum for w in weights]
    parts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


def split_load(load: Load, max_requests: int, weights: list[int]) -> list[tuple[Load, int] | None]:
    """The load and request budget of each slot; None for a slot that gets no work.

    Closed stages are split per stage so that each stage's total stays exact; a slot
    whose clients or users are 0 throughout gets nothing, and the budget is split over
    the other slots only (2 clients over 4 slots: the budget goes to the 2 with a client,
    not half of it to slots that never send). A slot whose budget share is 0 (a budget
    smaller than the slots) gets nothing either.
    """
    total = sum(weights)
    whole = {
        "clients": split_exact(load.clients, weights),
        "users": split_exact(load.users, weights),
        "max_connections": split_exact(load.max_connections, weights),
    }
    stage_clients = (
        [split_exact(round(s.target), weights) for s in load.stages] if load.model is LoadModel.CLOSED else []
    )
    loads: list[Load] = []
    for i, weight in enumerate(weights):
        part = load.part(weight, total, {k: v[i] for k, v in whole.items()})
        if stage_clients:
            part = replace(
                part, stages=tuple(Stage(s.duration_s, float(n[i])) for s, n in zip(load.stages, stage_clients))
            )
        if load.model is LoadModel.OPEN and load.max_connections:
            part = replace(part, max_connections=max(1, part.max_connections))
        loads.append(part)
    sending = [load.model is LoadModel.OPEN or part.peak > 0 for part in loads]
    budget_weights = [w if on else 0 for w, on in zip(weights, sending)]
    budgets = split_exact(max_requests, budget_weights) if any(budget_weights) else [0] * len(weights)
    return [
        (part, budget) if on and not (max_requests and budget == 0) else None
        for part, budget, on in zip(loads, budgets, sending)
    ]
