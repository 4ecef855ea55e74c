#!/usr/bin/env bash
# The release files as a user without Rust gets them: `make dist`'s wheels installed into a fresh
# virtualenv with no cargo, rustc or maturin on PATH, then `portkit lint` and `portkit verify` on a
# generated fixture. Run by `make test`; prints each step's seconds.
#
#   bash tests/release/no_cargo_install.sh DIST_DIR
#
# PYTHON makes the fresh virtualenv (default python3); REPO_PY, the clone's own environment,
# generates the fixture (fixtures/ is not part of the wheel). pip's cache makes the second
# install of torch quick.
set -euo pipefail
dist=$(cd "${1:?usage: no_cargo_install.sh DIST_DIR}" && pwd)
repo_py=$(cd "$(dirname "$0")/../.." && pwd)/${REPO_PY:-.venv/bin/python}
real_py=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
work=$(mktemp -d "${TMPDIR:-/tmp}/portkit-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

shopt -s nullglob
wheel=("$dist"/portkit-*-py3-none-any.whl)
native=("$dist"/portkit_native-*-abi3-*.whl)
[[ ${#wheel[@]} == 1 && ${#native[@]} == 1 ]] || { echo "no_cargo_install: want one portkit and one portkit_native wheel in $dist" >&2; exit 2; }

step() { printf 'no_cargo_install: %-58s %4ds\n' "$1" "$((SECONDS - t0))"; t0=$SECONDS; }
t0=$SECONDS; total=$SECONDS

# A PATH with the venv and the system's basic tools only: no ~/.cargo/bin, no pyenv shims.
clean_env=(env -i HOME="$HOME" PATH="$work/venv/bin:/usr/bin:/bin" LANG=C.UTF-8 TMPDIR="${TMPDIR:-/tmp}"
  PIP_DISABLE_PIP_VERSION_CHECK=1 PORTKIT_CACHE="$work/cache" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" RAYON_NUM_THREADS="${RAYON_NUM_THREADS:-2}")
for tool in cargo rustc maturin; do
  if "${clean_env[@]}" bash -c "command -v $tool" >/dev/null; then echo "no_cargo_install: $tool is on the clean PATH" >&2; exit 1; fi
done

"$real_py" -m venv "$work/venv"
step "fresh venv ($("$real_py" --version))"
# --only-binary: nothing may be built from source (that would need a compiler, or Rust).
"${clean_env[@]}" "$work/venv/bin/python" -m pip install --quiet --no-compile --only-binary=:all: "${wheel[0]}[verify]" "${native[0]}"
step "pip install portkit[verify] + portkit-native (pip cache)"

fixture=$("$repo_py" -c "from fixtures.cache import fixture_dir; print(fixture_dir('rope-theta-in-rope-parameters'))")
step "fixture rope-theta-in-rope-parameters (the clone's transformers)"

cd "$work"  # nothing of the clone on sys.path
"${clean_env[@]}" python -c "
import portkit, portkit_native, sys
for m in (portkit, portkit_native):
    assert m.__file__.startswith(sys.prefix), f'{m.__name__} imported from {m.__file__}, not the fresh venv'
print('no_cargo_install: portkit', portkit.__version__, 'and portkit_native from', sys.prefix)
"
set +e
"${clean_env[@]}" portkit lint "$fixture" > lint.txt
lint_rc=$?
"${clean_env[@]}" portkit verify "$fixture" --format json > verify.json
verify_rc=$?
set -e
step "portkit lint + portkit verify"
"${clean_env[@]}" python - "$lint_rc" "$verify_rc" <<'PY'
import json, sys
lint_rc, verify_rc = int(sys.argv[1]), int(sys.argv[2])
lint = open("lint.txt").read()
assert lint_rc == 1 and "PK101 [*]" in lint, (lint_rc, lint)
rep = json.load(open("verify.json"))
verdicts = {f["code"]: f["verdict"] for f in rep["findings"]}
assert verify_rc == 1 and verdicts.get("PK101") == "CONFIRMED", (verify_rc, verdicts)
v = rep["versions"]
print(f"no_cargo_install: lint exit {lint_rc} (PK101); verify exit {verify_rc}: PK101 {verdicts['PK101']} "
      f"(candle {v['candle']}, transformers {v['transformers']}, torch {v['torch']})")
PY
printf 'no_cargo_install: %-58s %4ds\n' "total" "$((SECONDS - total))"
