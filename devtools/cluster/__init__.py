"""`make cluster`: costplatform as a cluster of the engines people run, on loopback
(docs/scaling.md): a PostgreSQL primary and a hot standby, PgBouncer, gunicorn nodes behind nginx,
Celery workers on RabbitMQ with named queues, beat once."""
