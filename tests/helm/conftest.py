"""Fixtures of the chart tests: the pinned helm (built on first use, never skipped) and the default render."""

from __future__ import annotations

import pytest

from tests.helm.chart import Helm, HelmMissing, Manifest, install_helm


@pytest.fixture(scope="session")
def helm() -> Helm:
    """The project's pinned helm; builds it through scripts/install-helm.sh when the cache has none.

    A missing helm FAILS the tests (it is not a reason to skip them): CI must render the chart.
    """
    try:
        return Helm(install_helm())
    except HelmMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def default_manifests(helm: Helm) -> list[Manifest]:
    """The chart rendered with its default values."""
    return helm.render()
