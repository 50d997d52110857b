# xferlab: the two commands of the README.
#   make classic   install everything, run the classic suite against every server that can run here
#   make test      install everything, run the test suite (with the code checks of tests/test_code_rules.py):
#                  the tests marked parallel in two workers, then the rest one at a time (scripts/test.sh)
# and the long runs the test suite shortens:
#   make fuzz      libFuzzer on tpd's parsers, FUZZ_SECONDS per target, merging what it finds into
#                  servers/tpd/fuzz/corpus/ (commit the new files: the test suite replays them)
#   make soak      tpd's ASan build under mixed and misbehaving clients for SOAK_SECONDS
.PHONY: install classic test selftest fuzz soak
PYTEST_ARGS ?=
FUZZ_SECONDS ?= 600
SOAK_SECONDS ?= 600

install:
	bash scripts/install.sh

classic: install
	.venv/bin/xferlab run --preset classic

test: install
	bash scripts/test.sh $(PYTEST_ARGS)

selftest: install
	.venv/bin/xferlab selftest

fuzz: install
	TPD_FUZZ_SECONDS=$(FUZZ_SECONDS) TPD_FUZZ_MERGE=1 .venv/bin/python -m pytest tests/tpd/test_fuzz.py -p no:cacheprovider -o timeout=0 $(PYTEST_ARGS)

soak: install
	TPD_SOAK_SECONDS=$(SOAK_SECONDS) .venv/bin/python -m pytest tests/tpd/test_soak.py -s -o timeout=0 $(PYTEST_ARGS)
