FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY app app
COPY core core
COPY flask_eval flask_eval
COPY producer producer
COPY rubrics rubrics
COPY workers workers
COPY storage storage
COPY report report
COPY simulator simulator
RUN pip install --no-cache-dir -c constraints.txt .
RUN useradd --create-home flask
USER flask
ENTRYPOINT ["flask-eval"]
