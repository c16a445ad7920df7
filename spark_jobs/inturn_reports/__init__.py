"""The nightly delivery and ordering reports, as PySpark batch jobs.

Each table is one pure ``transform`` (``inturn_reports.transform``) between an extract
(Kafka in batch mode or exported Parquet/JSON files, ``inturn_reports.extract``) and a load
(Parquet partitioned by date, a CSV summary, a self-contained HTML report and optionally
PostgreSQL over JDBC, ``inturn_reports.load``). ``inturn_reports.job`` runs them in order;
``python -m inturn_reports`` and ``spark-submit`` run the same code.
"""
