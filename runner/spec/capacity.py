"""The ``capacity`` block of a workload entry (docs/methodology.md, "Capacity"): the
service level and the bounds of a search for the sustainable users of each server
(runner.metrics.capacity holds the search; runner.campaign.capacity queues its steps).

A capacity entry expands into one cell, its first step (``start`` users); each step's cell
is an open-loop cell whose offered rate is ``N x user_rate / B`` operations/s
(:func:`step_params`), B the payload bytes of one operation (:func:`op_bytes`: ``file_size``
for the sustained workloads, the mix's expected bytes per operation for ``mixed``), so
every step's parameters differ from the entry's only in ``clients`` and ``rate``."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runner.catalogue.mixed import mean_op_bytes, op_bytes_second_moment
from runner.catalogue.workloads import WorkloadParams, parse_size

#: Fewest operations each user must be due in one step: fewer make no steady rate.
MIN_OPS_PER_USER = 4
#: ``mixed``: the largest share of a step's ``duration`` that its mean residual operation
#: may stand for (:func:`CapacitySpec.check`).
MAX_RESIDUAL_SHARE = 0.25


def op_bytes(workload: str, params: WorkloadParams) -> float:
    """The payload bytes of one operation of ``workload`` (bytes): ``file_size`` for the
    sustained workloads; for ``mixed`` the expected bytes per operation of its mix and
    size distribution (runner.catalogue.mixed.mean_op_bytes), which may be 0 (a mix of
    metadata operations only)."""
    if workload == "mixed":
        return mean_op_bytes(params.mix, params.sizes, params.seed)
    return float(params.file_size)


class CapacitySpec(BaseModel):
    """The service level and search bounds of a capacity search.

    Attributes:
        user_rate: each user's demand in bytes/s (``"256K"`` is 256 KiB/s), and the floor
            each must keep when ``check_rate``.
        check_rate: a user below ``user_rate`` fails the step (false: p99 and Jain only).
        p99_ms: the largest p99 operation latency (ms, from the intended start); None: no bound.
        min_jain: the smallest Jain's index over the per-user rates.
        start: users of the first step.
        max_users: the ramp stops there (the answer is then "at least max_users").
        resolution: the bisection stops when the failing and passing N are this close (users).
        confirm: run the answer again, and go on below it when that run fails.
    """

    model_config = ConfigDict(extra="forbid")
    user_rate: int = Field(..., ge=1024, le=1 << 34, description="each user's demand and floor, bytes/s")
    check_rate: bool = True
    p99_ms: float | None = Field(None, gt=0, le=3_600_000)
    min_jain: float = Field(0.9, ge=0, le=1)
    start: int = Field(1, ge=1, le=20000)
    max_users: int = Field(1024, ge=1, le=20000)
    resolution: int = Field(1, ge=1, le=10000)
    confirm: bool = True

    @field_validator("user_rate", mode="before")
    @classmethod
    def _size(cls, v: object) -> object:
        return parse_size(v) if isinstance(v, str) else v

    def check(self, params: WorkloadParams, workload: str = "retr_sustained") -> None:
        """Raise ValueError naming the field when the search cannot run with ``params``:
        ``start`` above ``max_users``, no criterion at all, a mix that moves no payload, a
        step too short for :data:`MIN_OPS_PER_USER` operations per user, or (``mixed``) one
        whose mean residual operation (runner.catalogue.mixed.op_bytes_second_moment) stands
        for more than :data:`MAX_RESIDUAL_SHARE` of ``duration``."""
        if self.start > self.max_users:
            raise ValueError(f"capacity.start ({self.start}) is above capacity.max_users ({self.max_users})")
        if not self.check_rate and self.p99_ms is None:
            raise ValueError("capacity: give a service level: check_rate true or p99_ms")
        per_op = op_bytes(workload, params)
        if per_op <= 0:
            raise ValueError("capacity: params.mix moves no payload (no retr, stor or resume weight): "
                             "a per-user byte rate cannot be offered")
        ops = params.duration * self.user_rate / per_op
        if ops < MIN_OPS_PER_USER:
            what = "file_size" if workload != "mixed" else "bytes per operation of params.mix and params.sizes"
            raise ValueError(f"capacity: each user is due {ops:.3g} operations per step (duration "
                             f"{params.duration:g} s x user_rate {self.user_rate} B/s / {what} "
                             f"{per_op:.0f} B); need at least {MIN_OPS_PER_USER}: "
                             "raise params.duration or lower the bytes per operation")
        if workload == "mixed":
            residual = op_bytes_second_moment(params.mix, params.sizes, params.seed) / (2 * per_op) / self.user_rate
            if residual > MAX_RESIDUAL_SHARE * params.duration:
                raise ValueError(
                    f"capacity: the mix's large transfers are too large for a {params.duration:g} s step: the "
                    f"operation a user is in when the step ends stands for {residual:.3g} s of its demand on "
                    f"average (E[n^2] / (2 E[n] x user_rate)), more than {MAX_RESIDUAL_SHARE:.0%} of "
                    "params.duration, so the step would offer well above N x user_rate: raise "
                    "params.duration or make the largest sizes of params.sizes smaller")

    def step_params(self, params: WorkloadParams, clients: int, workload: str = "retr_sustained") -> WorkloadParams:
        """``params`` for the step of ``clients`` users of ``workload``: ``clients``, the
        open-loop ``rate`` ``clients x user_rate / op_bytes(workload, params)`` operations/s
        (capped at WorkloadParams' largest rate), and ``user_rate``."""
        rate = min(clients * self.user_rate / op_bytes(workload, params), 1_000_000.0)
        return params.model_copy(update={"clients": clients, "user_rate": self.user_rate, "rate": rate})
