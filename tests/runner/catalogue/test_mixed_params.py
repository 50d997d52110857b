"""The typed parameters of the mixed workload (runner.catalogue.mixed) through the campaign
spec: valid scripts and distributions parse; every bad field is refused with its path."""
from __future__ import annotations

import math
from collections import Counter

import pytest

from runner.catalogue.mixed import MAX_DIR_ENTRIES, MAX_FILE, SizeDist
from runner.catalogue.workloads import WORKLOADS, params_key
from runner.spec.model import SpecError, expand, parse_spec


def _spec(params: dict) -> dict:
    return {"servers": [{"name": "pyftpdlib", "version": "2.2.0"}], "repeats": 1,
            "workloads": [{"name": "mixed", "params": params}]}


def _errors(params: dict) -> dict[str, str]:
    with pytest.raises(SpecError) as ei:
        parse_spec(_spec(params))
    return dict(ei.value.errors)


def test_a_full_script_parses_and_expands():
    spec = parse_spec(_spec({"clients": 8, "mix": {"retr": 60, "list": 20, "dele": 0, "resume": 20},
                             "sizes": {"kind": "buckets", "buckets": {"4KiB": 60, "1MiB": 30, "100MiB": 10}},
                             "session_ops": 50, "session_seconds": 30, "think": "exponential", "think_ms": 200,
                             "seed": 42, "dir_entries": 1000}))
    p = spec.workloads[0].params
    assert p.sizes.buckets == {4096: 60, 1 << 20: 30, 100 << 20: 10}
    assert p.mix.probabilities() == pytest.approx({"retr": 0.6, "list": 0.2, "resume": 0.2})
    cells = expand(spec)
    assert len(cells) == 1 and cells[0].workload == "mixed"
    key = params_key("mixed", p)
    assert "mix=retr:60;list:20;resume:20" in key and "sizes=kind:buckets;buckets:4Kx60/1Mx30/100Mx10" in key
    assert len(key) <= 400
    assert "4K/1M/100M" in WORKLOADS["mixed"].title_for(p)


@pytest.mark.parametrize("params, path, words", [
    ({"mix": {"retr": 0, "noop": 0}}, "workloads.0.params.mix", "every operation weight is 0"),
    ({"mix": {"retr": -1}}, "workloads.0.params.mix.retr", "greater than or equal to 0"),
    ({"mix": {"retr": 1, "rm": 1}}, "workloads.0.params.mix.rm", "unknown field"),
    ({"mix": {"retr": 1e7}}, "workloads.0.params.mix.retr", "less than or equal"),
    ({"sizes": {"kind": "uniform", "min": "1M", "max": "4K"}}, "workloads.0.params.sizes", "larger than max"),
    ({"sizes": {"kind": "log2", "min": "1K"}}, "workloads.0.params.sizes", "give min and max"),
    ({"sizes": {"kind": "buckets"}}, "workloads.0.params.sizes", "give buckets"),
    ({"sizes": {"kind": "buckets", "buckets": {"4K": 0}}}, "workloads.0.params.sizes", "every weight is 0"),
    ({"sizes": {"kind": "buckets", "buckets": {"4K": -2}}}, "workloads.0.params.sizes", "weight -2"),
    ({"sizes": {"kind": "buckets", "buckets": {"4X": 1}}}, "workloads.0.params.sizes.buckets", "not a size"),
    ({"sizes": {"kind": "buckets", "buckets": {str(i + 1): 1 for i in range(17)}}},
     "workloads.0.params.sizes.buckets", "at most 16"),
    ({"sizes": {"size": MAX_FILE + 1}}, "workloads.0.params.sizes.size", "less than or equal"),
    ({"sizes": {"kind": "storm", "count": MAX_DIR_ENTRIES + 1}}, "workloads.0.params.sizes.count", "less than"),
    ({"sizes": {"kind": "storm", "count": 100_000, "size": "1G"}}, "workloads.0.params.sizes", "storm"),
    ({"sizes": {"kind": "normal"}}, "workloads.0.params.sizes.kind", "fixed"),
    ({"dir_entries": MAX_DIR_ENTRIES + 1}, "workloads.0.params.dir_entries", "less than or equal"),
    ({"dir_entries": 0}, "workloads.0.params.dir_entries", "greater than or equal"),
    ({"session_ops": 0}, "workloads.0.params.session_ops", "greater than or equal"),
    ({"think": "poisson"}, "workloads.0.params.think", "none"),
    ({"think_ms": -5}, "workloads.0.params.think_ms", "greater than or equal"),
    ({"seed": -1}, "workloads.0.params.seed", "greater than or equal"),
    ({"think": "fixed"}, "workloads.0.params", "give think_ms > 0"),
    ({"think_ms": 100}, "workloads.0.params", "think_ms is 100 but think is none"),
])
def test_bad_fields_are_named(params, path, words):
    errors = _errors(params)
    assert path in errors, errors
    assert words in errors[path], errors[path]


def test_log2_sizes_cover_the_octaves_evenly():
    """log2-uniform over [1 KiB, 1 MiB]: each of the 10 octaves holds about a tenth of 2,000
    drawn sizes (binomial, 4.5 standard deviations), all inside the range, reproducible."""
    d = SizeDist(kind="log2", min="1K", max="1M", files=256)
    a, b = d.fixture_set(5), d.fixture_set(5)
    assert a == b != d.fixture_set(6)
    draws = [s for seed in range(8) for s, w in d.fixture_set(seed) for _ in range(int(w))]
    assert len(draws) == 8 * 256 and all(1024 <= s <= 1 << 20 for s in draws)
    octaves = Counter(min(9, int(math.log2(s / 1024))) for s in draws)
    n, q = len(draws), 0.1
    for k in range(10):
        assert abs(octaves[k] - n * q) <= 4.5 * math.sqrt(n * q * (1 - q)), octaves
    assert d.bucket(3000) == "2K-4K" and SizeDist(kind="fixed", size=4096).bucket(4096) == "4K"
