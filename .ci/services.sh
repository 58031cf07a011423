#!/usr/bin/env bash
# Make sure PostgreSQL, Redis and RabbitMQ answer on localhost; start them where installed but stopped.
set -uo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { (exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\r\n' >&3 && head -c 5 <&3 | grep -q PONG) 2>/dev/null; }

if ! pg_up; then
  echo "PostgreSQL is not answering on 127.0.0.1:5432; starting it"
  if command -v pg_ctlcluster >/dev/null; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start || true
  fi
  for _ in $(seq 30); do pg_up && break; sleep 1; done
  pg_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432 (set DATABASE_URL)"; exit 1; }
fi

if ! redis_up; then
  echo "Redis is not answering on 127.0.0.1:6379; starting it"
  if command -v redis-server >/dev/null; then
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  fi
  for _ in $(seq 30); do redis_up && break; sleep 1; done
  redis_up || { echo "Redis is not reachable on 127.0.0.1:6379 (set CELERY_BROKER_URL)"; exit 1; }
fi
rabbit_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

# RabbitMQ carries the cluster test's named queues (tests/cluster, make cluster).
if ! rabbit_up; then
  echo "RabbitMQ is not answering on 127.0.0.1:5672; starting it"
  if command -v rabbitmq-server >/dev/null; then
    rabbitmq-server -detached || true
  fi
  for _ in $(seq 60); do rabbit_up && break; sleep 1; done
  rabbit_up || { echo "RabbitMQ is not reachable on 127.0.0.1:5672"; exit 1; }
fi
echo "PostgreSQL, Redis and RabbitMQ are up"
