"""The jars the reports add to PySpark: Spark's Kafka source and the PostgreSQL JDBC driver (``report_jars``), and
the Hadoop filesystem connectors of ``s3a://``, ``gs://`` and ``abfss://`` (``connector_jars``).

Each set is resolved from Maven Central with a profile of ``spark_jobs/pom.xml`` on first use and cached under
``~/.cache/inturn/``: ``spark-jars-<spark>-<scala>/`` for the Kafka source, which is resolved for exactly the
installed PySpark version and Scala binary version so the two can never drift apart, and
``hadoop-<scheme>-<hadoop>/`` for a connector, resolved for exactly the Hadoop client PySpark ships (hadoop-aws
and hadoop-azure are released with Hadoop and must match it). Jars PySpark already ships (scala-library, slf4j,
lz4, hadoop client...) are dropped so its own copies win.

``python -m inturn_reports.jars s3a gs abfss`` resolves sets ahead of time (the report image does) and prints
their jars.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark

from inturn.cache import cache_dir
from inturn.errors import ConfigError

_POM = Path(__file__).resolve().parent.parent / "pom.xml"
_VERSIONED_JAR = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


def pyspark_jars_dir() -> Path:
    """The folder of jars PySpark runs with."""
    return Path(pyspark.__file__).parent / "jars"


def spark_versions() -> tuple[str, str]:
    """(Spark version, Scala binary version) of the installed PySpark, e.g. ('4.0.0', '2.13')."""
    scala = [p.name for p in pyspark_jars_dir().glob("scala-library-*.jar")]
    match = re.match(r"scala-library-(\d+\.\d+)\.", scala[0]) if scala else None
    if match is None:
        raise ConfigError(f"cannot tell PySpark's Scala version: no scala-library jar in {pyspark_jars_dir()}")
    return pyspark.__version__, match.group(1)


def _artifact(jar: str) -> str:
    match = _VERSIONED_JAR.match(jar)
    return match.group("name") if match else jar


def hadoop_version() -> str:
    """The Hadoop client version PySpark ships (its ``hadoop-client-api`` jar), e.g. '3.4.1' for PySpark 4.0.0."""
    for jar in pyspark_jars_dir().glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise ConfigError(f"cannot tell PySpark's Hadoop version: no hadoop-client-api jar in {pyspark_jars_dir()}")


#: The URI schemes whose Hadoop connector ``connector_jars`` resolves (profiles of spark_jobs/pom.xml).
CONNECTORS = ("s3a", "gs", "abfss")


def report_jars() -> list[Path]:
    """The Kafka source and the JDBC driver for ``spark.jars``, resolved from Maven Central on first use (needs
    ``mvn`` then)."""
    spark, scala = spark_versions()
    what = f"spark-sql-kafka-0-10_{scala}:{spark} (PySpark {spark} needs exactly that version)"
    props = {"spark.version": spark, "scala.binary.version": scala}
    return _jars("kafka", f"spark-jars-{spark}-{scala}", props, what)


def connector_jars(scheme: str) -> list[Path]:
    """The Hadoop filesystem connector of ``scheme`` (one of ``CONNECTORS``) for PySpark's Hadoop version, resolved
    from Maven Central on first use (needs ``mvn`` then)."""
    if scheme not in CONNECTORS:
        raise ConfigError(f"no Hadoop connector for {scheme}:// (the report has {', '.join(CONNECTORS)})")
    hadoop = hadoop_version()
    what = f"the {scheme}:// connector for Hadoop {hadoop} (PySpark's Hadoop client)"
    return _jars(scheme, f"hadoop-{scheme}-{hadoop}", {"hadoop.version": hadoop}, what)


def _jars(profile: str, name: str, props: dict[str, str], what: str) -> list[Path]:
    folder = cache_dir() / name
    marker = folder / ".complete"
    if not marker.exists():
        _resolve(folder, profile, props, what)
        marker.touch()
    return sorted(folder.glob("*.jar"))


def _resolve(folder: Path, profile: str, props: dict[str, str], what: str) -> None:
    if shutil.which("mvn") is None:
        raise ConfigError(f"mvn not found: install Maven (apt-get install maven) to fetch {what}")
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = ["mvn", "-q", "-B", "-f", str(_POM), "-P", profile, "dependency:copy-dependencies"]
    cmd += [f"-D{key}={value}" for key, value in props.items()]
    cmd.append(f"-DoutputDirectory={staging}")
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
        raise ConfigError(f"could not resolve {what} from Maven Central:\n{tail}")
    shipped = {_artifact(p.name) for p in pyspark_jars_dir().glob("*.jar")}
    for jar in staging.glob("*.jar"):
        if _artifact(jar.name) in shipped:
            jar.unlink()
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)


def main(argv: list[str] | None = None) -> int:
    """``python -m inturn_reports.jars [kafka] [s3a] [gs] [abfss]``: resolve the sets named and print their jars."""
    for name in sys.argv[1:] if argv is None else argv:
        for jar in report_jars() if name == "kafka" else connector_jars(name):
            print(jar)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
