.PHONY: install lock demo lint test test-fast bench ci

# the exact versions the tests ran with (constraints.txt; `make lock` regenerates it)
install:
	python3 -m venv .venv
	.venv/bin/pip install -c constraints.txt -e '.[dev]'

lock:
	scripts/lock

demo: install
	.venv/bin/flask-eval demo

lint:
	scripts/lint

test:
	.venv/bin/python -m pytest -q

test-fast:
	.venv/bin/python -m pytest -q -m "not slow"

ci:
	bash .ci/run
