"""The nightly delivery and ordering reports, as PySpark batch jobs.

Each table is one pure ``transform`` (``inturn_reports.transform``) between an extract
(Kafka in batch mode or exported Parquet/JSON files, ``inturn_reports.extract``) and a load
(Parquet partitioned by date, a CSV summary, a self-contained HTML report and optionally
PostgreSQL over JDBC, ``inturn_reports.load``). ``inturn_reports.job`` runs them in order;
``python -m inturn_reports`` and ``spark-submit`` run the same code.
"""

import os

# The driver's Arrow tables (the small tables, the trends) are small and short-lived: the C library's allocator
# gives their memory back, where Arrow's default (mimalloc) keeps it. Over the benchmark's 10M events the
# driver's Python process peaked at 245-257 MiB instead of 395-399 MiB. Arrow reads this when it is first
# imported, which no module of this package does before this line; an explicit setting wins.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
