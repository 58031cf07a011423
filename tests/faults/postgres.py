"""The private PostgreSQL cluster of the fault and cluster suites lives with the cluster tooling."""

from devtools.cluster.postgres import PrivatePostgres

__all__ = ["PrivatePostgres"]
