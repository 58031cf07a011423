"""Development and operations tooling around the product, outside it: `make run` (run.py and
the end-to-end demo, demo.py), the generated demo months (demo_data.py, `manage.py demo_data`),
backups and the restore drill (backup.py), the tiny random-weight model (tiny_model.py) and the
workload driver for vLLM (workload.py). The product packages (apps, costplatform, serving,
collectors, wire) never import it (tests/test_layers.py); it is a Django app only so that
`manage.py demo_data` finds its command."""
