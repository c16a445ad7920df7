"""scripts/report-changed.sh: CI runs `make test-compat` when the report changed since it last passed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "report-changed.sh"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, path: str, text: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"change {path}")
    return _git(repo, "rev-parse", "HEAD")


def _changed(repo: Path, **env: str) -> tuple[int, str]:
    done = subprocess.run(
        ["scripts/report-changed.sh"], cwd=repo, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env}
    )
    return done.returncode, done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A clone-like repository with the script, a report and something else."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "ci@example.invalid")
    _git(tmp_path, "config", "user.name", "ci")
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "report-changed.sh")
    (tmp_path / ".ci").mkdir()
    _commit(tmp_path, "pyproject.toml", "pyspark>=4.0.0,<4.4\n")
    _commit(tmp_path, "spark_jobs/inturn_reports/job.py", "one\n")
    _commit(tmp_path, "tests/reports/test_x.py", "one\n")
    return tmp_path


def test_without_a_record_the_report_counts_as_changed(repo: Path) -> None:
    assert _changed(repo)[0] == 0


def test_after_a_record_only_a_change_of_the_report_counts(repo: Path) -> None:
    subprocess.run(["scripts/report-changed.sh", "--record"], cwd=repo, check=True, capture_output=True)
    _commit(repo, ".ci/test-compat-passed", (repo / ".ci" / "test-compat-passed").read_text())
    assert _changed(repo)[0] == 1
    _commit(repo, "services/worker/x.py", "elsewhere\n")
    assert _changed(repo)[0] == 1
    for path in ("spark_jobs/inturn_reports/job.py", "tests/reports/test_x.py", "pyproject.toml"):
        _commit(repo, path, f"{path} changed\n")
        code, said = _changed(repo)
        assert code == 0, said
        subprocess.run(["scripts/report-changed.sh", "--record"], cwd=repo, check=True, capture_output=True)
        assert _changed(repo)[0] == 1


def test_a_record_is_not_taken_over_uncommitted_changes(repo: Path) -> None:
    (repo / "spark_jobs" / "inturn_reports" / "job.py").write_text("edited, not committed\n")
    done = subprocess.run(["scripts/report-changed.sh", "--record"], cwd=repo, capture_output=True, text=True)
    assert "not recorded" in done.stderr
    assert not (repo / ".ci" / "test-compat-passed").exists()


def test_a_range_given_by_ci_decides_instead(repo: Path) -> None:
    before = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "docs/x.md", "docs\n")
    assert _changed(repo, INTURN_REPORT_CHANGED_SINCE=before)[0] == 1
    _commit(repo, "spark_jobs/inturn_reports/page.py", "page\n")
    assert _changed(repo, INTURN_REPORT_CHANGED_SINCE=before)[0] == 0
    # A commit this clone does not have (a shallow clone): changed, so test-compat runs rather than being skipped.
    assert _changed(repo, INTURN_REPORT_CHANGED_SINCE="0" * 40)[0] == 0
