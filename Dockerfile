# syntax=docker/dockerfile:1.7
# The image of every inturn service, chosen by subcommand (the Helm chart sets `command: [inturn]`):
#   inturn worker | webhook | bridge --mode pull|push | topics create|check | migrate
# and, built with REPORT=1, the report image: the same plus the `report` extra (pyspark, pyarrow, numpy, pandas),
# Java 17 for Spark, and Spark's Kafka source and the PostgreSQL JDBC driver fetched at build time (the running pod
# needs no Maven) for the nightly report under spark-submit. Spark on Kubernetes starts executor pods from the
# report image with the argument "executor": the entrypoint below handles that. The service image carries none
# of the report's packages (about 640 MB of them: docs/reports.md).
#
#   docker build -t inturn:0.1.0 .                                    # the services
#   docker build --build-arg REPORT=1 -t inturn-report:0.1.0 .        # the report
#   docker run --rm inturn:0.1.0 --help
#
# The base is pinned by version (3.11 patch + Debian release), not by digest: this repository is built without
# registry access to resolve a digest. A release pipeline should pin `python@sha256:...` (Renovate/Dependabot keep
# it current); the version pin already fixes the Python and Debian releases the code is tested against.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# 1: the report image (the `report` extra, Java, Spark's jars); empty: the service image.
ARG REPORT=""
# The object stores the report image can read and write (docs/reports.md); empty: local files and claims only.
ARG REPORT_CONNECTORS="s3a gs abfss"

# ---------------------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build
ARG REPORT
ARG REPORT_CONNECTORS

# Maven only resolves the Spark jars (with the Java runtime it depends on); none of it reaches the runtime image.
# The man1 folder is missing from slim images and the JDK's postinst links a man page into it.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends maven=3.8.* \
    && rm -rf /var/lib/apt/lists/*

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VENV=/opt/inturn/venv \
    INTURN_CACHE_DIR=/opt/inturn/cache

WORKDIR /src
COPY pyproject.toml README.md ./
COPY libs ./libs
COPY services ./services
COPY spark_jobs ./spark_jobs
COPY cli ./cli
COPY devtools ./devtools

# A wheel (not an editable install): the image holds the built distribution and nothing of the source tree.
# hadolint ignore=DL3013
RUN python -m venv "$VENV" \
    && "$VENV/bin/pip" install --upgrade pip \
    && "$VENV/bin/pip" wheel --no-deps --wheel-dir /dist . \
    && wheel="$(ls /dist/inturn-*.whl)" \
    && "$VENV/bin/pip" install "$wheel${REPORT:+[report]}"

# Spark's Kafka source for exactly the installed PySpark and the JDBC driver, and the Hadoop connectors of
# REPORT_CONNECTORS (s3a: hadoop-aws with the AWS SDK bundle, about 560 MB; gs: 36 MB; abfss: 7 MB) for PySpark's
# Hadoop, into /opt/inturn/jars (the chart puts that folder on the driver's and executors' class path). The
# pom.xml sits next to the package in the source tree but not in the wheel, so it is put where the installed
# package looks for it for the duration of this step.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && mkdir -p /opt/inturn/jars \
    && if [ -n "$REPORT" ]; then \
         cp spark_jobs/pom.xml "$site/pom.xml" \
         && "$VENV/bin/python" -m inturn_reports.jars kafka $REPORT_CONNECTORS | xargs -I{} cp -v {} /opt/inturn/jars/ \
         && rm "$site/pom.xml"; \
       fi \
    && rm -rf /root/.m2 \
    && "$VENV/bin/python" -m compileall -q "$site"

# ---------------------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ARG VERSION=0.1.0
ARG REPORT
LABEL org.opencontainers.image.title="inturn" \
      org.opencontainers.image.description="Delivers every chat room's messages to messaging platforms in turn" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"

# The report image only: Java 17 runs Spark (the report's driver and executors); procps gives Spark's scripts `ps`.
RUN if [ -n "$REPORT" ]; then \
      mkdir -p /usr/share/man/man1 \
      && apt-get update \
      && apt-get install -y --no-install-recommends openjdk-17-jre-headless=17.* procps=2:4.* \
      && rm -rf /var/lib/apt/lists/* \
      && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17; \
    fi

# A fixed non-root uid/gid (the chart's securityContext uses the same 10001).
RUN groupadd --system --gid 10001 inturn \
    && useradd --system --uid 10001 --gid inturn --home-dir /home/inturn --create-home --shell /usr/sbin/nologin inturn

COPY --from=build /opt/inturn /opt/inturn

# Spark on Kubernetes runs its pods with the argument "executor" (and "driver" in cluster mode), expecting the
# entrypoint of Spark's own images; anything else is an inturn subcommand.
COPY --chmod=0755 <<'EOF' /opt/inturn/bin/entrypoint
#!/bin/bash
set -euo pipefail
case "${1:-}" in
  executor)
    # Spark hands the executor's JVM options over as SPARK_JAVA_OPT_0..N.
    mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  driver)
    shift
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client "$@"
    ;;
  *)
    exec inturn "$@"
    ;;
esac
EOF

# Read-only-root friendly: nothing below writes outside /tmp (the chart mounts an emptyDir there); bytecode was
# compiled at build time and is not rewritten; the Spark jar cache is complete and only read.
# MALLOC_ARENA_MAX=1: glibc gives every thread that allocates its own malloc arena, and librdkafka's threads
# and the executor threads each keep one; with two, a worker holding 25k rooms stays ~15% smaller, with one a
# further 2-3% (docs/operations.md).
# MALLOC_MMAP_THRESHOLD_=131072: blocks of 128 KiB and more (librdkafka's fetch and decompression buffers) are mapped
# on their own and given back when freed; glibc otherwise raises the threshold after the first such free and serves
# them from the heap, where they stay as holes: 25k rooms in flight 265 MiB against 310 MiB (docs/operations.md).
ENV PATH=/opt/inturn/venv/bin:$PATH \
    MALLOC_ARENA_MAX=1 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    VIRTUAL_ENV=/opt/inturn/venv \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    INTURN_CACHE_DIR=/opt/inturn/cache \
    JAVA_HOME=/usr/lib/jvm/java-17 \
    SPARK_HOME=/opt/inturn/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/inturn/venv/bin/python \
    HOME=/home/inturn \
    TMPDIR=/tmp

USER 10001:10001
WORKDIR /home/inturn
# worker /metrics,/healthz,/readyz; webhook; bridge (see the chart's values.yaml).
EXPOSE 8081 8080 8082
ENTRYPOINT ["/opt/inturn/bin/entrypoint"]
CMD ["--help"]
