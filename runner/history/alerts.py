"""Each change of a regressions list with what explains or qualifies it: the environment
and build facts that differ between its two sides (runner.history.provenance) and, where
the figure is calibrated in the after side's environment class, the expected
false-alarm rate of the rule at the thresholds in use and the noise floor
(runner.history.calibration)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from runner.history.calibration import CalibrationIndex, expected_false_alarm_rate, latest_calibrations
from runner.history.provenance import FactDelta, change_diffs
from runner.history.series import Change


@dataclass(frozen=True)
class Alert:
    """A change and its annotations.

    Attributes:
        change: the change (runner.history.Change).
        env_diff: the facts that differ between ``change.before`` and ``change.after``.
        false_alarm_rate: fraction of A/A pairs of the calibration the rule flags at the
            thresholds in use (None: uncalibrated, or an environment change, which is
            never tested).
        noise_floor: the calibration's noise floor (relative; None when uncalibrated).
        calibration: the id of the calibration used (None when uncalibrated).
    """

    change: Change
    env_diff: list[FactDelta]
    false_alarm_rate: float | None
    noise_floor: float | None
    calibration: int | None

    def as_dict(self) -> dict[str, Any]:
        """The change's dict plus ``env_diff``, ``false_alarm_rate``, ``noise_floor``, ``calibration``."""
        return {**self.change.as_dict(), "env_diff": [d.as_dict() for d in self.env_diff],
                "false_alarm_rate": self.false_alarm_rate, "noise_floor": self.noise_floor,
                "calibration": self.calibration}


def annotate(session: Session, changes: list[Change], *, alpha: float, min_effect: float) -> list[Alert]:
    """The :class:`Alert` of each of ``changes``, in order; the false-alarm rate is
    counted at ``alpha`` and ``min_effect`` (those the changes were found with).
    Three queries: the calibrations, the facts of every point. Raises ValueError for
    out-of-range thresholds."""
    out: list[Alert] = []
    if not changes:
        return out
    index = CalibrationIndex(latest_calibrations(session))
    rates: dict[int, float] = {}  # calibration row id -> its rate at these thresholds
    for c, diff in zip(changes, change_diffs(session, changes)):
        cal = index.lookup(c.key, c.after.env_class) if c.kind != "env_changed" else None
        rate = None
        if cal is not None:
            if cal.id not in rates:
                rates[cal.id] = expected_false_alarm_rate(cal, alpha=alpha, min_effect=min_effect)
            rate = rates[cal.id]
        out.append(Alert(c, diff, rate, cal.noise_floor if cal is not None else None,
                         cal.calibration if cal is not None else None))
    return out
