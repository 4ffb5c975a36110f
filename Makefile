.PHONY: install lock demo lint test test-unit test-integration bench ci

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

# Two tiers (docs/design/testing.md): unit, in-process, about two minutes on two cores; integration, real
# Redis, RabbitMQ, PostgreSQL and processes (.ci/run starts the services). `make test`:
# both, as .ci/run runs them (scripts/test). Parallel (pytest-xdist), 3 workers on 2 cores:
# a third of the unit tier's time and most of the integration tier's is waiting; each
# worker has its own Redis database.
test:
	scripts/test

test-unit:
	.venv/bin/python -m pytest -q -m unit -n 3

test-integration:
	.venv/bin/python -m pytest -q -m "integration and not serial" -n 3
	.venv/bin/python -m pytest -q -m "integration and serial" -n 2 --dist loadgroup

ci:
	bash .ci/run
