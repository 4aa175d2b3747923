# Signoff: one image for every process; the command picks it (worker, beat, web, or any CLI
# command). Build: docker build -t signoff .   Run everything: docker compose up (see
# docker-compose.yml).
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY worker ./worker
COPY webui ./webui
# A wheel of the package alone: no dev, realmodel or embedded extras.
RUN pip wheel --no-deps --wheel-dir /wheels .


FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
# The versions of constraints.txt, the lock that `make run` and `make test` install from too.
COPY constraints.txt /tmp/constraints.txt
RUN pip install -c /tmp/constraints.txt /wheels/*.whl \
    && rm -rf /wheels /tmp/constraints.txt \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin signoff \
    && mkdir -p /var/lib/signoff/archive && chown signoff /var/lib/signoff/archive

USER signoff
WORKDIR /home/signoff
EXPOSE 8000
ENTRYPOINT ["signoff"]
CMD ["--help"]
