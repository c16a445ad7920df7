"""The jars the reports add to PySpark: Spark's Kafka source and the PostgreSQL JDBC driver (``report_jars``).

The Kafka source and the JDBC driver are resolved from Maven Central with ``spark_jobs/pom.xml`` on first use
and cached under ``~/.cache/inturn/spark-jars-<spark>-<scala>/``. The Kafka source is resolved for exactly the
installed PySpark version and Scala binary version, so the two can never drift apart. Jars PySpark
already ships (scala-library, slf4j, lz4, hadoop client...) are dropped so its own copies win.
"""

from __future__ import annotations

import re
import shutil
import subprocess
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


def report_jars() -> list[Path]:
    """The extra jars for ``spark.jars``, resolved from Maven Central on first use (needs ``mvn`` then)."""
    spark, scala = spark_versions()
    folder = cache_dir() / f"spark-jars-{spark}-{scala}"
    marker = folder / ".complete"
    if not marker.exists():
        _resolve(folder, spark, scala)
        marker.touch()
    return sorted(folder.glob("*.jar"))


def _resolve(folder: Path, spark: str, scala: str) -> None:
    if shutil.which("mvn") is None:
        raise ConfigError("mvn not found: install Maven (apt-get install maven) to fetch Spark's Kafka source")
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(_POM),
        "dependency:copy-dependencies",
        f"-Dspark.version={spark}",
        f"-Dscala.binary.version={scala}",
        f"-DoutputDirectory={staging}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
        raise ConfigError(
            f"could not resolve spark-sql-kafka-0-10_{scala}:{spark} from Maven Central "
            f"(PySpark {spark} needs exactly that version):\n{tail}"
        )
    shipped = {_artifact(p.name) for p in pyspark_jars_dir().glob("*.jar")}
    for jar in staging.glob("*.jar"):
        if _artifact(jar.name) in shipped:
            jar.unlink()
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
