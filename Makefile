# portkit: two commands on a fresh machine.
#   make demo   set up, build the native candle wheel, generate a fixture, compare candle vs transformers
#   make test   set up, build, run the whole test suite
# Everything installs into .venv; the candle build is cached outside the clone.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export CARGO_TARGET_DIR ?= $(HOME)/.cache/portkit/target
export PORTKIT_CACHE ?= $(HOME)/.cache/portkit
# Fixed thread counts make the reference and candle's CPU kernels repeatable.
export OMP_NUM_THREADS ?= 2
export RAYON_NUM_THREADS ?= 2

.PHONY: demo test venv native clean-native mutation dump-compat

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[verify,test,plot]'
	touch $@

venv: $(VENV)/.installed

# maturin builds the wheel (release) and installs it into the venv.
native: venv
	$(VENV)/bin/maturin build --release --quiet -m native/Cargo.toml -i $(PY) -o $(CARGO_TARGET_DIR)/wheels
	$(PY) -m pip install --quiet --force-reinstall --no-deps $$(ls -t $(CARGO_TARGET_DIR)/wheels/portkit_native-*.whl | head -n 1)

demo: native
	$(PY) -m portkit.demo

test: native
	cd native && cargo test --release --quiet --no-default-features
	cd native/portkit-dump && cargo test --release --quiet
	$(PY) -m pytest -q

# portkit-dump against candle-core 0.11.0 and the newest 0.11.x on crates.io (network; builds
# candle-core again in $(CARGO_TARGET_DIR)-compat, minutes): not part of `make test`.
dump-compat:
	native/portkit-dump/check-candle-versions.sh

# Mutation testing (mutmut): not part of `make test` or CI, it takes tens of minutes. Each
# module is mutated against the tests that target it; prints the score per module.
# docs/mutation.md has the scores and why each surviving mutant is equivalent.
mutation: native
	$(PY) -m pip install --quiet -e '.[mutation]'
	nice -n 15 $(PY) tests/mutation/run_mutmut.py --survivors $(PORTKIT_CACHE)/mutation/survivors.txt
