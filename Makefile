PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-all bench bench-quick lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	rm -rf runs/demo
	$(VENV)/bin/hrlsched compare --scenario default --seeds 1 --workers 2 --policies hrl,optimus-tuned+migrate,optimus-tuned,optimus+pack,fifo --out runs/demo
	@echo "runs: runs/demo/runs/<policy>/seed0 (config.yaml, jobs.csv, rounds.csv, summary.json)"

test: $(STAMP)
	$(PY) -m pytest -q -n 2

test-all: $(STAMP)
	$(PY) -m pytest -q -n 2 -m ''

# The speed benchmarks (benchmarks/async_progress.py, a figure of docs/perf-model.md, is not among them).
SPEED_BENCHMARKS := sim_speed perf_speed env_speed hrl_latency import_time simulate_phases env_instructions

bench: $(STAMP)
	@for b in $(SPEED_BENCHMARKS); do echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || exit 1; done

# Each speed benchmark once with a small flag, under 2 minutes in all (env_instructions,
# minutes under valgrind, is left to `make bench`).
bench-quick: $(STAMP)
	@set -e; run() { echo "== benchmarks/$$*"; $(PY) benchmarks/$$*; }; \
	run sim_speed.py --max-gpus 512; \
	run perf_speed.py; \
	run env_speed.py --env hrlsched/Allocation-v0; \
	run hrl_latency.py --repeat 1 --points 2; \
	run import_time.py --repeats 2; \
	run simulate_phases.py --scenario default --policy fifo --repeats 1

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache
