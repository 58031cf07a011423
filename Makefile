# costplatform — `make run` starts the product on embedded defaults, `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The test suite runs against real servers; these are the local defaults.
TEST_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/costplatform
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: install install-base screenshots run demo-data test test-moved-clock test-dates test-pooled cluster cluster-packages fuzz lint bench bench-reclassify bench-wal bench-ledger bench-shipper bench-proxy bench-audits bench-serving bench-alerts bench-pages soak faults security services browser clean

install: $(STAMP)

# Two install levels: the platform alone (what `make run RUN_ARGS=--no-vllm` and `make demo-data`
# need, a minute), and everything (tests, vLLM's CPU build and torch; several minutes).
BASE_STAMP := $(VENV)/.installed-base

install-base: $(BASE_STAMP)

# devtools/install.py: a line a step with its time; pip's output in $(VENV)/install.log, and on
# the terminal only what is not a known harmless warning (setuptools' deprecation banners).
$(BASE_STAMP): pyproject.toml constraints.txt
	@$(PYTHON) devtools/install.py $(VENV) base
	@touch $(BASE_STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) devtools/install.py $(VENV) all
	@touch $(STAMP) $(BASE_STAMP)

# `make run` without vLLM installs the platform alone.
RUN_INSTALL := $(if $(findstring --no-vllm,$(RUN_ARGS)),install-base,install)

# The demo's books are kept in China's calendar; set COSTPLATFORM_ACCOUNTING_TZ to use another.
DEMO_TZ := $${COSTPLATFORM_ACCOUNTING_TZ:-Asia/Shanghai}

run: $(RUN_INSTALL)  ## RUN_ARGS=--no-vllm: the platform alone; --once: exit after the sample; see python -m devtools.run --help
	COSTPLATFORM_ACCOUNTING_TZ=$(DEMO_TZ) $(PY) -m devtools.run $(RUN_ARGS)

demo-data: install-base  ## last month closed (budgets, revenue, findings, an approved close) and this one so far, without vLLM; DEMO_RECORDS=200000 per whole month; DEMO_MONTH=YYYY-MM loads that month alone
	$(PY) manage.py migrate --no-input -v0
	COSTPLATFORM_ACCOUNTING_TZ=$(DEMO_TZ) $(PY) manage.py demo_data \
	  $${DEMO_MONTH:+--month $$DEMO_MONTH} --records $${DEMO_RECORDS:-200000}

screenshots: install browser  ## docs/screenshots/ from demo data in a real browser (a database of its own: DATABASE_URL, default costplatform_screens)
	createdb -h 127.0.0.1 -U postgres costplatform_screens 2>/dev/null || true
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_screens} $(PY) -m devtools.screenshots $(SHOTS_ARGS)

services:
	bash .ci/services.sh

# The browser tests drive the Debian chromium package (and need a CJK font for the Chinese pages);
# the month pack's first sheet is rendered by LibreOffice and poppler.
browser:
	@command -v chromium >/dev/null && fc-list :lang=zh | grep -q . && command -v soffice >/dev/null \
	  && command -v pdftoppm >/dev/null \
	  || (apt-get update -qq && apt-get install -y -qq chromium fonts-wqy-microhei libreoffice-calc-nogui poppler-utils)

# The slowest tests are listed at the end, to keep an eye on the suite's time. TEST_WORKERS
# processes run it (a test file stays on one worker, the vLLM tests together: tests/conftest.py);
# TEST_WORKERS=0 runs it in this process alone. Three on two cores: the tests wait on the servers,
# engines and browsers they start, and with two workers a core stood idle 15 % of the suite
# (vmstat); with three, next to none (docs/benchmarks.md, "`make test` on a fresh clone").
TEST_WORKERS ?= 3
# The suite keeps the bytecode it compiles, where the environment says not to (PYTHONDONTWRITEBYTECODE,
# as on CI's machine): each of its workers, and each server, Celery worker and command the tests
# start (a few hundred processes), would otherwise compile the project from its sources again, and
# pytest would rewrite every test module's asserts again in each worker (7 s of its collection's
# 15 s). __pycache__ is ignored by git.
test test-moved-clock test-dates: export PYTHONDONTWRITEBYTECODE :=
test: install services browser cluster-packages
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	  $(PY) -m pytest -n $(TEST_WORKERS) --durations=25 $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-moved-clock

# The suite with every clock moved: this process's, the servers' and workers' the tests start, and a
# private PostgreSQL's now() (devtools/timeshift.py; docs/running.md, "Any date"). `make test` ends with
# the short form: the tests that do not start engines, clusters or fault drills, at 400 days from now.
# `make test-dates` runs the whole suite at each instant of TEST_DATES ("wall time|zone"; +Nd is N days
# from now; a zone other than UTC keeps the books in it) and prints a line an instant.
MOVED_CLOCK_AT ?= +400d
MOVED_CLOCK_TESTS ?= tests --ignore=tests/serving --ignore=tests/cluster --ignore=tests/faults \
  --ignore=tests/hostile --ignore=tests/bench --ignore=tests/test_run.py
TEST_DATES ?= 2027-01-31 23:59|Asia/Shanghai;2027-03-14 02:30|America/New_York;2028-02-29 12:00|UTC;+400d|UTC
test-moved-clock: install services
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	  $(PY) -m devtools.timeshift --at "$(MOVED_CLOCK_AT)" -- \
	  $(PY) -m pytest -n $(TEST_WORKERS) -q -p no:cacheprovider $(MOVED_CLOCK_TESTS)

test-dates: install services browser cluster-packages
	@export DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)}; \
	IFS=';' read -ra instants <<< "$(TEST_DATES)"; results=(); failed=0; log=$$(mktemp); \
	for instant in "$${instants[@]}"; do \
	  at="$${instant%|*}"; zone="$${instant#*|}"; books=$$([ "$$zone" = UTC ] || echo --accounting-zone); \
	  start=$$(date +%s); \
	  $(PY) -m devtools.timeshift --at "$$at" --zone "$$zone" $$books -- \
	    $(PY) -m pytest -n $(TEST_WORKERS) -q -p no:cacheprovider $(PYTEST_ARGS) 2>&1 | tee $$log; \
	  rc=$${PIPESTATUS[0]}; [ $$rc = 0 ] || failed=1; \
	  results+=("$$at ($$zone$${books:+, books in it}): $$( [ $$rc = 0 ] && echo passed || echo FAILED) \
	    -- $$(grep -E '[0-9]+ (passed|failed)' $$log | tail -1) in $$(( $$(date +%s) - start )) s"); \
	done; \
	rm -f $$log; printf '\ntest-dates:\n'; printf '  %s\n' "$${results[@]}"; exit $$failed

# The cluster's engines: nginx and PgBouncer from Debian (PostgreSQL and RabbitMQ come with `make services`).
cluster-packages:
	@command -v nginx >/dev/null && command -v pgbouncer >/dev/null \
	  || (apt-get update -qq && apt-get install -y -qq nginx pgbouncer)

test-pooled: install services cluster-packages  ## the ingest path's tests (and the day-run lock's) through PgBouncer in transaction pooling mode; see docs/scaling.md
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	  $(PY) -m devtools.cluster.pgbouncer -- $(PY) -m pytest tests/ingest tests/common/test_dayrun.py tests/pricing/test_reprice.py -q $(PYTEST_ARGS)

cluster: install services cluster-packages  ## nginx + 2 gunicorn nodes, PgBouncer, a hot standby, 2 Celery workers on RabbitMQ queues, beat; the cluster fault test in full and its table; see docs/scaling.md
	CLUSTER_FULL=1 DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	  timeout 1200 $(PY) -m pytest tests/cluster -q -s $(PYTEST_ARGS)

security: install services  ## the security suite alone (also in make test): routes, rate limits, secrets, deploy settings, audit log; see docs/security.md
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	  $(PY) -m pytest tests/security $(PYTEST_ARGS)

# Besides the linters and the import contracts: the record's token kinds are listed once, in
# wire/contract.py (tests/test_one_record_contract.py, run alone: a second list fails).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m tests.test_one_record_contract
	$(PY) -m tests.test_public_faces
	$(PY) -m tests.test_no_upward_names

bench: install services
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_bench} \
	  $(PY) bench/ingest.py $(BENCH_ARGS)

bench-ledger: install services  ## close and trial balance over a month of 10M records; see docs/ledger.md
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_bench_ledger} \
	  $(PY) bench/ledger.py $(BENCH_ARGS)

bench-wal: install services  ## WAL bytes and seconds a record costs the primary at ingest, pricing and accrual; BENCH_ARGS="--records 100000"; see docs/scaling.md
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_bench_wal} \
	  $(PY) bench/wal.py $(BENCH_ARGS)

bench-reclassify: install services  ## BENCH_ARGS="--records 1000000" for a quick run; see docs/benchmarks.md
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_bench_reclassify} \
	  $(PY) bench/reclassify.py $(BENCH_ARGS)

bench-shipper: install  ## records/s into the durable spool; see docs/collectors.md
	$(PY) bench/shipper.py $(BENCH_ARGS)

# LiteLLM, the peer bench-proxy measures beside the proxy, lives in a venv of its own: its
# dependency pins would disturb the product's. BENCH_ARGS=--no-litellm skips it.
LITELLM_VENV := .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.installed

$(LITELLM_STAMP): bench/litellm-constraints.txt
	test -x $(LITELLM_VENV)/bin/python || $(PYTHON) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet -c bench/litellm-constraints.txt 'litellm[proxy]'
	touch $(LITELLM_STAMP)

bench-proxy: install $(if $(findstring --no-litellm,$(BENCH_ARGS)),,$(LITELLM_STAMP))  ## latency the proxy adds, p50/p99 and CPU, beside LiteLLM's proxy; see docs/collectors.md
	$(PY) bench/proxy.py $(BENCH_ARGS)

bench-serving: install  ## the same load against vLLM with and without the instrumentation (7-10 min; BENCH_ARGS=--eager for a quicker run, no torch.compile); see docs/serving.md
	$(PY) bench/serving_overhead.py $(BENCH_ARGS)

bench-alerts: install services  ## one evaluation cycle at 1,000 business lines x 20 models, and ingest -> delivered; see docs/alerts.md
	CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} $(PY) bench/alerts.py $(BENCH_ARGS)

fuzz: install services  ## tests/hostile in its long form: schemathesis with its coverage phase and HOSTILE_EXAMPLES (200) cases an operation, the decoder and rule fuzzers 25x; see docs/reliability.md
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	  HOSTILE_EXAMPLES=$${HOSTILE_EXAMPLES:-200} $(PY) -m pytest tests/hostile -s $(PYTEST_ARGS)

bench-pages: install services  ## every dashboard page's p50/p95 over a month of 10M records; BENCH_ARGS="--records 1000000" for a quick run; see docs/dashboards.md
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_bench_pages} \
	  $(PY) bench/pages.py $(BENCH_ARGS)

faults: install services  ## the fault injection suite in full: more records, 3 repetitions, a table of faults survived; see docs/reliability.md
	FAULTS_FULL=1 DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} CELERY_BROKER_URL=$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)} \
	  $(PY) -m pytest tests/faults -q $(PYTEST_ARGS)

bench-audits: install services  ## the monthly audit over a generated month (2M records); see docs/audits.md
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_bench_audits} \
	  $(PY) bench/audits.py $(BENCH_ARGS)

soak: install services  ## sustained ingest at 50 % of a measured max for 30 min with reads; SOAK_ARGS="--minutes 2"; see docs/reliability.md
	DATABASE_URL=$${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/costplatform_soak} \
	  CELERY_BROKER_URL=$${CELERY_BROKER_URL:-redis://127.0.0.1:6379/13} \
	  $(PY) bench/soak.py $(SOAK_ARGS)

backup: install  ## BACKUP_FILE=costplatform.dump: pg_dump (custom format) of DATABASE_URL; see docs/reliability.md
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} $(PY) -m devtools.backup dump $${BACKUP_FILE:-costplatform.dump}

restore: install  ## BACKUP_FILE=costplatform.dump RESTORE_URL=postgresql://.../new_db: pg_restore into a new database
	$(PY) -m devtools.backup restore $${BACKUP_FILE:-costplatform.dump} $(RESTORE_URL)

backup-drill: install  ## dump DATABASE_URL, restore it into <name>_drill, compare trial balances, records and rollups, drop the copy
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} $(PY) -m devtools.backup drill

clean:
	rm -rf $(VENV) $(LITELLM_VENV) .pytest_cache .mypy_cache .ruff_cache
