"""The self-test's reference: the loopback limit and the C receiver (`limit`, `netlimit.c`),
used by `xferlab selftest` and benchmarks/tpd_targets.py."""
