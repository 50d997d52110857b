# xferlab: the two commands of the README.
#   make classic   install everything, run the classic suite against every server that can run here
#   make test      install everything, run the test suite (with the code checks of tests/test_code_rules.py)
.PHONY: install classic test selftest
PYTEST_ARGS ?=

install:
	bash scripts/install.sh

classic: install
	.venv/bin/xferlab run --preset classic

test: install
	.venv/bin/python -m pytest $(PYTEST_ARGS)

selftest: install
	.venv/bin/xferlab selftest
