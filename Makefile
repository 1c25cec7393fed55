# poet-edge developer commands. Run `make help`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
POET := $(VENV)/bin/poet
ARM_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
DEMO_OUT ?= build/demo

.PHONY: help venv toolchain demo test fuzz lint bench clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { echo "installing python3-venv (apt)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv python3-pip; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plot]'
	@touch $@

venv: $(VENV)/.installed  ## create .venv and install poet-edge with test dependencies

toolchain:  ## install gcc, cmake, the Arm toolchain, QEMU and chromium (report tests) through apt when missing
	@if command -v gcc >/dev/null && command -v cmake >/dev/null && command -v arm-none-eabi-gcc >/dev/null && command -v qemu-system-arm >/dev/null \
	    && command -v chromium >/dev/null \
	    && arm-none-eabi-gcc -print-file-name=librdimon.a | grep -q /; then echo "toolchain present"; \
	 elif [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    gcc make cmake chromium $(ARM_PACKAGES); \
	 else echo "missing toolchain: run as root or: sudo apt-get install gcc make cmake chromium $(ARM_PACKAGES)"; exit 1; fi

DIGITS := examples/digits
demo: venv toolchain  ## digits CNN: pretrain on the host with poet-edge, fine-tune on rotated digits on an emulated Cortex-M4 in 64KB
	$(PY) $(DIGITS)/pretrain.py $(DEMO_OUT)/digits_pretrained.onnx
	$(POET) compile $(DEMO_OUT)/digits_pretrained.onnx --device cortex-m4 --ram 64KB --batch 8 --lr 0.05 -o $(DEMO_OUT)/finetune
	$(POET) simulate $(DEMO_OUT)/finetune
	$(POET) run $(DEMO_OUT)/finetune --target qemu-cortex-m4 --steps 200 --data $(DIGITS)/rotated_train.npz \
	  --eval-data $(DIGITS)/rotated_test.npz

TEST_JOBS ?= auto
test: venv toolchain  ## run every test (pytest, one worker per core: TEST_JOBS=1 for one process)
	$(PY) -m pytest -q -n $(TEST_JOBS) --durations=25

FUZZ_CASES ?= 3000
FUZZ_SEEDS ?= 1,2,3,4
FUZZ_CLI_EXAMPLES ?= 300
FUZZ_SPLIT_CASES ?= 3000
fuzz: venv toolchain  ## long fuzz: kernels (fast vs reference bit for bit, 20x the CI cases, 4 seeds, ASan+UBSan, QEMU), the CLI (300 random examples per property) and operator splitting (3000 random models)
	POET_FUZZ_CASES=$(FUZZ_CASES) POET_FUZZ_SEED=$(FUZZ_SEEDS) $(PY) -m pytest -q tests/test_kernel_fuzz.py
	POET_FUZZ_CLI_EXAMPLES=$(FUZZ_CLI_EXAMPLES) POET_FUZZ_CLI_RANDOM=1 $(PY) -m pytest -q tests/test_cli_fuzz.py
	POET_FUZZ_SPLIT_CASES=$(FUZZ_SPLIT_CASES) $(PY) -m pytest -q -n $(TEST_JOBS) tests/test_split_fuzz.py

lint:  venv ## ruff (lint + format check), mypy on the package, the pipeline's layer order (import-linter), no private names across modules, highspy only in poet_edge/highs.py
	$(VENV)/bin/ruff check poet_edge tests bench examples tools
	$(VENV)/bin/ruff format --check poet_edge tools
	$(VENV)/bin/mypy poet_edge
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python tools/check_private_imports.py poet_edge bench tests
	$(VENV)/bin/python tools/check_highs_imports.py poet_edge bench tools examples

BENCH_HELPERS := bench/provenance.py bench/results_index.py
bench: venv toolchain  ## run the benchmark scripts in bench/ (each prints a table), then index bench/results/RESULTS.md
	@set -e; for b in $(filter-out $(BENCH_HELPERS),$(wildcard bench/*.py)); do echo "== $$b"; $(PY) $$b; done
	$(PY) bench/results_index.py

clean:  ## remove build outputs (keeps .venv)
	rm -rf build .pytest_cache .ruff_cache .mypy_cache
