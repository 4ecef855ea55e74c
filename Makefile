# portkit: two commands on a fresh machine.
#   make demo   set up, build the native candle wheel, generate a fixture, compare candle vs transformers
#   make test   set up, build, run the whole test suite (and check the release files: make dist)
#   make dist   the release files in dist/: portkit's sdist and wheel, portkit-native's abi3 wheel
# Everything installs into .venv; the candle build is cached outside the clone.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DIST ?= dist
export CARGO_TARGET_DIR ?= $(HOME)/.cache/portkit/target
export PORTKIT_CACHE ?= $(HOME)/.cache/portkit
# Fixed thread counts make the reference and candle's CPU kernels repeatable.
export OMP_NUM_THREADS ?= 2
export RAYON_NUM_THREADS ?= 2

.PHONY: demo test venv native dist clean-native mutation fuzz dump-compat release-oracles release-verify

# portkit[verify] depends on portkit-native of the same version, which PyPI does not have for a
# clone: build that wheel first and let pip find it (--find-links).
$(VENV)/.installed: pyproject.toml native/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 'maturin>=1.5,<2'
	$(VENV)/bin/maturin build --release --quiet -m native/Cargo.toml -i $(PY) -o $(CARGO_TARGET_DIR)/wheels
	$(PY) -m pip install --quiet --find-links $(CARGO_TARGET_DIR)/wheels -e '.[verify,test,plot]'
	touch $@

venv: $(VENV)/.installed

# maturin builds the wheel (release) and installs it into the venv.
native: venv
	$(VENV)/bin/maturin build --release --quiet -m native/Cargo.toml -i $(PY) -o $(CARGO_TARGET_DIR)/wheels
	$(PY) -m pip install --quiet --force-reinstall --no-deps $$(ls -t $(CARGO_TARGET_DIR)/wheels/portkit_native-*.whl | head -n 1)

demo: native
	$(PY) -m fixtures.demo

# The wheels a user installs without Rust. auditwheel names the manylinux tag the native wheel
# really satisfies; the filename must carry that tag.
dist: venv
	rm -rf $(DIST)
	$(PY) -m build --outdir $(DIST) .
	$(VENV)/bin/maturin build --release --quiet -m native/Cargo.toml -i $(PY) -o $(DIST)
	$(VENV)/bin/auditwheel show $(DIST)/portkit_native-*.whl | tee $(DIST)/auditwheel.txt
	tag=$$(basename $(DIST)/portkit_native-*.whl .whl | sed 's/.*-abi3-//; s/\..*//'); \
	  grep -q "consistent with the following platform tag:" $(DIST)/auditwheel.txt && \
	  tr -d '\n' < $(DIST)/auditwheel.txt | grep -q "consistent with the following platform tag:[^.]*$$tag" || \
	  { echo "auditwheel does not confirm $$tag" >&2; exit 1; }
	rm $(DIST)/auditwheel.txt
	ls -l $(DIST)

test: native dist
	$(VENV)/bin/ruff check .  # portkit lints itself: [tool.ruff] in pyproject.toml
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy  # [tool.mypy] in pyproject.toml
	$(VENV)/bin/lint-imports --no-cache  # the layers and no cycles ([tool.importlinter] in pyproject.toml)
	cd native && cargo test --release --quiet --no-default-features
	cd native/portkit-dump && cargo test --release --quiet
	$(VENV)/bin/actionlint .github/workflows/*.yml
	bash tests/release/no_cargo_install.sh $(DIST)
	$(PY) -m pytest -q

# portkit-dump against candle-core 0.11.0 and the newest 0.11.x on crates.io (network; builds
# candle-core again in $(CARGO_TARGET_DIR)-compat, minutes): not part of `make test`.
dump-compat:
	native/portkit-dump/check-candle-versions.sh

# lint's config mirror against every candle release's own serde (fixtures/release_oracle.py): builds
# native/release-oracle against each release from 0.9.1 (minutes each, cached in $(PORTKIT_CACHE)) and
# exits 1 on any FN, FP or differing message. Not part of `make test`, which checks 0.11.1's own oracle
# (the wheel) and verifies on 0.11.0's runner.
release-oracles: venv
	$(PY) -m fixtures.release_oracle --cases 10

# verify on the candle releases `make test` does not build (0.9.1, 0.9.2, 0.10.0, 0.10.1, 0.10.2; 0.11.0's
# runner is built in `make test`): each is built from native/ on first use (minutes, cached in
# $(PORTKIT_CACHE)/native), then tests_releases/ runs every family's fixture the release has a module for
# and the facts that differ there.
release-verify: native
	$(PY) -m pytest -q -p no:cacheprovider tests_releases

# Mutation testing (mutmut): not part of `make test` or CI, it takes tens of minutes. Each
# module is mutated against the tests that target it; prints the score per module.
# docs/mutation.md has the scores and why each surviving mutant is equivalent.
mutation: native
	$(PY) -m pip install --quiet -e '.[mutation]'
	nice -n 15 $(PY) tests/mutation/run_mutmut.py --survivors $(PORTKIT_CACHE)/mutation/survivors.txt

# The differential's long run: 50 random config mutations per family, lint's prediction against
# transformers and candle's own module (fixtures/differential.py); writes docs/differential.md
# and exits 1 on any false negative or false positive. Then 500000 random tokenizer.json
# components, PK507's prediction against the tokenizers crate (tests/native/test_tokenizer_serde.py),
# and 200 mutated configs per encoder family against candle and sentence-transformers
# (fixtures/encoder_differential.py; writes docs/encoder-differential.md). `make test` runs bounded ones.
fuzz: native
	nice -n 5 $(PY) -m fixtures.differential --cases 50 --markdown docs/differential.md
	for r in $$($(PY) -c "from portkit.candle_release import NATIVE, RUNNABLE; print(*(r for r in RUNNABLE if r != NATIVE))"); do \
	  nice -n 5 $(PY) -m fixtures.differential --candle $$r --cases 20 || exit 1; done
	PORTKIT_TOKENIZER_FUZZ=500000 nice -n 5 $(PY) -m pytest -q tests/native/test_tokenizer_serde.py -k random
	nice -n 5 $(PY) -m fixtures.encoder_differential --cases 200 --markdown docs/encoder-differential.md
