"""Shared pytest fixtures (generic; parts may add their own below)."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")


@pytest.fixture(scope="session")
def dask_client():
    """One in-process Dask LocalCluster (2 workers x 1 thread) shared by the session (default client)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=40
    )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()
