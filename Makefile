.PHONY: install demo lint test test-fast bench

install:
	python3 -m venv .venv
	.venv/bin/pip install -e '.[dev]'

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
