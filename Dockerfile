# The image installs the wheel built from the whole source tree, as `pip install .` and
# PyPI's wheel are: the same packages (pyproject.toml finds them: flask_eval and the layers
# it links to) and data files, whatever layers are added. .dockerignore leaves out only
# what no wheel holds (tests, docs, benchmarks, caches, the virtualenv, local stores);
# tests/test_docker_image.py checks that every package folder reaches the build.
FROM python:3.11-slim AS build
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --disable-pip-version-check -w /wheels .

FROM python:3.11-slim
WORKDIR /app
COPY constraints.txt /tmp/constraints.txt
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-cache-dir --disable-pip-version-check -c /tmp/constraints.txt \
        /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels /tmp/constraints.txt
RUN useradd --create-home flask
USER flask
ENTRYPOINT ["flask-eval"]
