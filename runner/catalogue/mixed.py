"""The typed parameters of the ``mixed`` workload (docs/methodology.md, "Mixed sessions"):
the operation weights of a session script (:class:`OpMix`) and the file-size distribution
of its transfers (:class:`SizeDist`), with their bounds and the pure functions the load
generator and the reports share (drawing a size, the size bucket of a transfer, the fixture
set). Plain data: imports nothing from the runner.

Every size is in bytes; a size may be written as text (``"4KiB"``, ``"1M"``: binary
multiples, :func:`runner.catalogue.workloads.parse_size` reads them).
"""
from __future__ import annotations

import math
import random
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Operation kinds of a mixed session, in table order. ``resume`` is ``REST <offset>`` then
#: ``RETR`` (RFC 3659 section 5); ``cwd`` is ``CWD <listing dir>`` then ``CDUP``.
OPS: tuple[str, ...] = ("retr", "stor", "list", "mlsd", "cwd", "size", "mdtm", "dele", "resume", "noop")
#: The operations that move file payload (their figures are broken down by size bucket).
TRANSFER_OPS: tuple[str, ...] = ("retr", "stor", "resume")
#: Largest file of a distribution (bytes): 16 GiB.
MAX_FILE = 1 << 34
#: Largest sum of the distinct fixture sizes of one distribution (bytes): 64 GiB.
MAX_SET_BYTES = 1 << 36
#: Most files of a small-file storm directory, and most entries of a listing directory.
MAX_DIR_ENTRIES = 100_000
MAX_WEIGHT = 1_000_000.0

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)


def _size(v: object) -> object:
    if not isinstance(v, str):
        return v
    m = _SIZE_RE.match(v)
    if not m:
        raise ValueError(f"not a size: {v!r} (use e.g. 4096, 4KiB, 1M, 100MiB)")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()])


class OpMix(BaseModel):
    """Weights of the operations of a mixed session (non-negative, at most
    :data:`MAX_WEIGHT` each, not all zero). Each operation of a session is drawn with
    probability ``weight / sum(weights)`` from the session's seeded generator. Unknown
    operation names are refused (the field is named in the error)."""

    model_config = ConfigDict(extra="forbid")

    retr: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    stor: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    list: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    mlsd: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    cwd: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    size: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    mdtm: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    dele: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    resume: float = Field(0.0, ge=0, le=MAX_WEIGHT)
    noop: float = Field(0.0, ge=0, le=MAX_WEIGHT)

    @model_validator(mode="after")
    def _not_all_zero(self) -> OpMix:
        if not any(math.isfinite(w) and w > 0 for w in self.weights().values()):
            raise ValueError("every operation weight is 0: give at least one operation a positive weight "
                             f"({', '.join(OPS)})")
        return self

    def weights(self) -> dict[str, float]:
        """``{op: weight}`` in :data:`OPS` order, zero weights included."""
        return {op: float(getattr(self, op)) for op in OPS}

    def probabilities(self) -> dict[str, float]:
        """``{op: weight / total}`` of the operations with a positive weight."""
        w = {k: v for k, v in self.weights().items() if v > 0}
        total = sum(w.values())
        return {k: v / total for k, v in w.items()}


def default_mix() -> OpMix:
    """The default session script: a browsing and downloading user (weights sum to 100)."""
    return OpMix(retr=40, stor=10, list=10, mlsd=5, cwd=10, size=10, mdtm=5, dele=5, resume=5)


class SizeDist(BaseModel):
    """A file-size distribution of RETR/STOR/resume (sizes in bytes).

    Attributes:
        kind: ``fixed`` (every transfer ``size``), ``uniform`` (uniform in ``[min, max]``),
            ``log2`` (log2-uniform in ``[min, max]``: each power-of-two octave equally
            likely, warp's ``--obj.randsize``), ``buckets`` (``{size: weight}``) or ``storm``
            (``count`` files of ``size`` bytes in one directory; each RETR takes one of them
            at random).
        size: the file size of ``fixed`` and ``storm``; 1 .. :data:`MAX_FILE`.
        min / max: the range of ``uniform`` and ``log2``; 1 <= min <= max <= MAX_FILE.
        buckets: ``{size: weight}``, 1 to 16 sizes, weights non-negative, not all zero.
        files: ``uniform`` / ``log2``: how many distinct sizes are drawn once (seeded)
            from the range to make the fixture set; each transfer then takes one of them
            at random (2 .. 256).
        count: ``storm``: files in the storm directory (1 .. :data:`MAX_DIR_ENTRIES`).
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["fixed", "uniform", "log2", "buckets", "storm"] = "fixed"
    size: int = Field(1 << 20, ge=1, le=MAX_FILE)
    min: int | None = Field(None, ge=1, le=MAX_FILE)
    max: int | None = Field(None, ge=1, le=MAX_FILE)
    buckets: dict[int, float] = Field(default_factory=dict, max_length=16)
    files: int = Field(16, ge=2, le=256)
    count: int = Field(10_000, ge=1, le=MAX_DIR_ENTRIES)

    @field_validator("size", "min", "max", mode="before")
    @classmethod
    def _sizes(cls, v: object) -> object:
        return _size(v)

    @field_validator("buckets", mode="before")
    @classmethod
    def _bucket_sizes(cls, v: object) -> object:
        if not isinstance(v, dict):
            return v
        out: dict[object, object] = {}
        for k, w in v.items():
            out[_size(k)] = w
        return out

    @model_validator(mode="after")
    def _consistent(self) -> SizeDist:
        if self.kind in ("uniform", "log2"):
            if self.min is None or self.max is None:
                raise ValueError(f"kind {self.kind}: give min and max (bytes)")
            if self.min > self.max:
                raise ValueError(f"min {self.min} is larger than max {self.max}")
        if self.kind == "buckets":
            if not self.buckets:
                raise ValueError("kind buckets: give buckets, e.g. {4KiB: 60, 1MiB: 30, 100MiB: 10}")
            for s, w in self.buckets.items():
                if not 1 <= s <= MAX_FILE:
                    raise ValueError(f"buckets: size {s} outside 1..{MAX_FILE}")
                if not (math.isfinite(w) and 0 <= w <= MAX_WEIGHT):
                    raise ValueError(f"buckets: weight {w} of size {s} outside 0..{MAX_WEIGHT:g}")
            if not any(w > 0 for w in self.buckets.values()):
                raise ValueError("buckets: every weight is 0")
        if self.kind == "storm" and self.size * self.count > MAX_SET_BYTES:
            raise ValueError(f"storm: {self.count} files of {self.size} bytes exceed {MAX_SET_BYTES} bytes")
        if self.kind in ("uniform", "log2"):
            assert self.max is not None
            most = self.files * self.max
        else:
            most = sum(self.buckets) if self.kind == "buckets" else self.size
        if most > MAX_SET_BYTES:
            raise ValueError(f"the fixture files of this distribution may need {most} bytes; at most {MAX_SET_BYTES}")
        return self

    def fixture_set(self, seed: int) -> list[tuple[int, float]]:
        """The distinct file sizes the server must hold and their weights, ``[(bytes,
        weight), ...]`` sorted by size: ``fixed``/``storm`` one size; ``buckets`` its sizes
        (zero weights dropped); ``uniform``/``log2`` ``files`` sizes drawn once with
        ``random.Random(seed)`` (equal weights; a size drawn twice counts twice)."""
        if self.kind in ("fixed", "storm"):
            return [(self.size, 1.0)]
        if self.kind == "buckets":
            return sorted((s, float(w)) for s, w in self.buckets.items() if w > 0)
        assert self.min is not None and self.max is not None  # checked by _consistent
        rng = random.Random(f"sizes:{seed}")
        drawn: dict[int, float] = {}
        for _ in range(self.files):
            if self.kind == "uniform":
                s = rng.randint(self.min, self.max)
            else:
                s = int(round(2 ** rng.uniform(math.log2(self.min), math.log2(self.max))))
                s = min(max(s, self.min), self.max)
            drawn[s] = drawn.get(s, 0.0) + 1.0
        return sorted(drawn.items())

    def bucket(self, size: int) -> str:
        """The size bucket of a transfer of ``size`` bytes, the label of the per-bucket
        figures: the size itself (``4K``, ``1M``, ``100M``) for ``fixed``, ``buckets`` and
        ``storm``; for ranges its power-of-two octave, ``64K-128K`` (``[2^k, 2^(k+1))``)."""
        if self.kind in ("fixed", "buckets", "storm"):
            return size_label(size)
        k = max(0, int(size).bit_length() - 1)
        return f"{size_label(1 << k)}-{size_label(1 << (k + 1))}"


def size_label(n: int) -> str:
    """Bytes in binary units as the seed writes them: ``4K``, ``1M``, ``1.5M``, ``100``."""
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            v = n / div
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return str(n)


def mean_op_bytes(mix: OpMix, sizes: SizeDist, seed: int) -> float:
    """The expected payload bytes of one operation drawn from ``mix`` (bytes, >= 0): the sum
    over ``retr`` and ``stor`` of ``p(op) x E[size]`` plus ``p(resume) x E[size - offset]``,
    where E[size] is the weighted mean of ``sizes.fixture_set(seed)`` and a resume of a
    file of s > 1 bytes reads s - k bytes for k uniform in 1..s-1 (mean s/2; a 1-byte file
    is read whole). Other operations move no payload. The open loop of the ``mixed``
    workload paces each user with it (runner.load.ftp.mixed), and a capacity search turns a
    per-user byte rate into operations/s with it (runner.spec.capacity)."""
    fset = sizes.fixture_set(seed)
    total_w = sum(w for _, w in fset)
    mean_size = sum(s * w for s, w in fset) / total_w
    mean_resume = sum((s / 2 if s > 1 else 1.0) * w for s, w in fset) / total_w
    p = mix.probabilities()
    return (p.get("retr", 0.0) + p.get("stor", 0.0)) * mean_size + p.get("resume", 0.0) * mean_resume


def op_bytes_second_moment(mix: OpMix, sizes: SizeDist, seed: int) -> float:
    """E[n^2] of the payload bytes n of one operation drawn from ``mix`` (bytes^2): retr and
    stor ``E[size^2]``; resume ``E[(s - k)^2]`` for k uniform in 1..s-1, about ``s^2 / 3``;
    others 0. With :func:`mean_op_bytes` it gives the mean residual ``E[n^2] / (2 E[n])``:
    the payload of the operation a user is in the middle of when a step ends, which an
    open-loop step runs on top of its ``duration x rate`` (the inspection paradox of
    renewal theory; runner.spec.capacity bounds it)."""
    fset = sizes.fixture_set(seed)
    total_w = sum(w for _, w in fset)
    m2 = sum(float(s) * s * w for s, w in fset) / total_w
    m2_resume = sum((float(s) * s / 3 if s > 1 else 1.0) * w for s, w in fset) / total_w
    p = mix.probabilities()
    return (p.get("retr", 0.0) + p.get("stor", 0.0)) * m2 + p.get("resume", 0.0) * m2_resume
