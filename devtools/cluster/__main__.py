"""python -m devtools.cluster --seconds 600: bring the cluster up on loopback, print where each
part listens, hold it (Ctrl-C ends it sooner), take it down. `make cluster` runs its fault test."""

from __future__ import annotations

import argparse
import time

from devtools.cluster.topology import PASSWORD, USER, Cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=600, help="how long to hold the cluster up")
    parser.add_argument("--web-nodes", type=int, default=2)
    parser.add_argument("--worker-nodes", type=int, default=2)
    parser.add_argument("--keep-logs", action="store_true", help="leave the cluster's directory (logs) behind")
    args = parser.parse_args()
    cluster = Cluster(web_nodes=args.web_nodes, worker_nodes=args.worker_nodes)
    try:
        cluster.up()
        assert cluster.primary and cluster.standby and cluster.pgbouncer
        print(f"nginx        {cluster.url}  (log in as {USER} / {PASSWORD})")
        print(f"web nodes    {', '.join(f'127.0.0.1:{p}' for p in cluster.web_ports)}")
        print(f"PgBouncer    127.0.0.1:{cluster.pgbouncer.port} (transaction pooling) -> primary")
        print(f"primary      127.0.0.1:{cluster.primary.port}   standby 127.0.0.1:{cluster.standby.port}")
        print(f"RabbitMQ     vhost {cluster.vhost}; workers: {len(cluster.workers)}, beat: 1")
        print(f"collector key {cluster.key}")
        print(f"logs         {cluster.root}", flush=True)
        time.sleep(args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.down(keep=args.keep_logs)


if __name__ == "__main__":
    main()
