"""The workload entries of a spec (``WorkloadSpec``: a workload or preset with its
parameters) and their saturation sweep (docs/methodology.md,
"Saturation curve"): ``params: {clients: [1, 2, 4, ..., 512]}`` (or the entry's own
``sweep: [...]``) runs the workload once per client count, each count its own cell
family (its ``params_key`` differs only in ``clients``), reported together as a curve
(runner.report.saturation). Imports nothing of the runner but the catalogue and
runner.spec.profile."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runner.catalogue.workloads import CLASSIC_SUITE, WORKLOADS, WorkloadParams
from runner.spec.capacity import CapacitySpec
from runner.spec.profile import ProfileField

#: Workload presets of a spec entry (``preset: classic``): names of runner.catalogue.workloads.
PRESETS: dict[str, tuple[str, ...]] = {"classic": CLASSIC_SUITE}

#: Most client counts in one sweep.
MAX_SWEEP = 64


def move_clients_list(data: Any) -> Any:
    """A workload entry's raw data with a list ``params.clients`` moved to ``sweep``
    (a list in params is how a spec writes a sweep; ``sweep`` is how it is stored). Anything
    else is returned as it is; bad values are reported by the fields' own validation.
    Raises ValueError when both ``params.clients`` is a list and ``sweep`` is given."""
    if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
        return data
    clients = data["params"].get("clients")
    if not isinstance(clients, list):
        return data
    if data.get("sweep") is not None:
        raise ValueError("give the client counts once: a list in params.clients or sweep, not both")
    params = {k: v for k, v in data["params"].items() if k != "clients"}
    return {**data, "params": params, "sweep": clients}


def check_sweep(sweep: list[int] | None) -> list[int] | None:
    """The client counts of a sweep, sorted ascending. Raises ValueError naming the
    fault: empty, more than :data:`MAX_SWEEP`, a count repeated, a count outside 1..20000
    (WorkloadParams.clients)."""
    if sweep is None:
        return None
    if not sweep:
        raise ValueError("sweep: give at least one client count")
    if len(sweep) > MAX_SWEEP:
        raise ValueError(f"sweep: {len(sweep)} client counts; at most {MAX_SWEEP}")
    if len(set(sweep)) != len(sweep):
        raise ValueError(f"sweep: client counts repeated in {sweep}")
    bad = [n for n in sweep if not 1 <= n <= 20000]
    if bad:
        raise ValueError(f"sweep: client counts {bad} outside 1..20000")
    return sorted(sweep)


def param_sets(params: WorkloadParams, sweep: list[int] | None) -> list[WorkloadParams]:
    """The WorkloadParams of each cell family of an entry: ``params`` itself without a
    sweep, else one copy per client count, ascending."""
    if not sweep:
        return [params]
    return [params.model_copy(update={"clients": n}) for n in sweep]


def capacity_ready(name: str) -> bool:
    """Whether workload ``name`` can be a capacity search's profile: it takes an open-loop
    ``rate`` and a per-user ``user_rate`` (its cells then store ``users_at_rate``, the
    fairness figures and the latency from the intended start), e.g. ``retr_sustained``."""
    return {"rate", "user_rate"} <= set(WORKLOADS[name].uses)


class WorkloadSpec(BaseModel):
    """A workload by name, or a preset expanding into several, with parameter overrides;
    ``sweep`` (or a list in ``params.clients``): one cell family per client count
    (the saturation curve)."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    preset: str | None = None
    params: WorkloadParams = Field(default_factory=WorkloadParams)
    sweep: list[int] | None = Field(None, description="client counts of a saturation sweep")
    profile: ProfileField = Field(None, description="profile this entry's cells (runner.spec.profile); None inherits")
    capacity: CapacitySpec | None = Field(None, description="search the sustainable users at a service level")

    @model_validator(mode="before")
    @classmethod
    def _clients_list(cls, data: Any) -> Any:
        return move_clients_list(data)

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, v: list[int] | None) -> list[int] | None:
        return check_sweep(v)

    @model_validator(mode="after")
    def _one_of(self) -> WorkloadSpec:
        if (self.name is None) == (self.preset is None):
            raise ValueError("give exactly one of 'name' (a workload) or 'preset'")
        if self.name is not None and self.name not in WORKLOADS:
            raise ValueError(f"unknown workload {self.name!r}; known: {', '.join(WORKLOADS)}")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; known: {', '.join(PRESETS)}")
        if self.capacity is not None:
            if self.name is None or not capacity_ready(self.name):
                known = ", ".join(n for n in WORKLOADS if capacity_ready(n))
                raise ValueError(f"capacity: needs a workload by name with an open loop and per-user rates ({known})")
            if self.sweep is not None:
                raise ValueError("capacity: the search chooses the client counts; give no sweep")
            self.capacity.check(self.params, self.name)
        return self

    def names(self) -> tuple[str, ...]:
        """Workload names this entry stands for, in order."""
        return PRESETS[self.preset] if self.preset else (self.name,)  # type: ignore[return-value]

    def param_sets(self) -> list[WorkloadParams]:
        """The parameters of each cell family (one per client count of a sweep); a capacity
        search's first step only (the campaign queues the next ones)."""
        if self.capacity is not None:
            return [self.capacity.step_params(self.params, self.capacity.start, self.names()[0])]
        return param_sets(self.params, self.sweep)
