#!/usr/bin/env bash
# Builds, or reuses, one virtual environment per verl version for the verl integration tests
# (tests/integrations/test_verl_envs.py runs the tests inside them).
#
#   scripts/build_verl_envs.sh            # every version: 0.7.1 and 0.9.1
#   scripts/build_verl_envs.sh 0.9.1      # one
#
# Each environment lives outside the clone, in $CURRICULUM_CACHE (default
# ~/.cache/curriculum-scheduler) as verl-<version>-<key>, where <key> is a hash of its
# requirements and constraints files: a changed pin builds a new one, an unchanged one is
# reused in seconds. torch stays the project's CPU build (scripts/verl/constraints.txt), and
# `pip check` must pass before an environment is marked complete.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${CURRICULUM_CACHE:-$HOME/.cache/curriculum-scheduler}"
PYTHON="${PYTHON:-python3}"
CONSTRAINTS=scripts/verl/constraints.txt
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(0.7.1 0.9.1)
mkdir -p "$CACHE"
for version in "${versions[@]}"; do
  req="scripts/verl/requirements-$version.txt"
  [ -f "$req" ] || { echo "build_verl_envs: no $req" >&2; exit 2; }
  key="$(cat "$req" "$CONSTRAINTS" | sha256sum | cut -c1-12)"
  env="$CACHE/verl-$version-$key"
  if [ -f "$env/.complete" ]; then
    echo "verl $version: reusing $env"
    continue
  fi
  echo "verl $version: building $env"
  start=$SECONDS
  rm -rf "$env"
  "$PYTHON" -m venv "$env"
  "$env/bin/python" -m pip install -q --upgrade pip
  # (pip warns about every package the local indexes lack; those lines say nothing here)
  nice -n 10 "$env/bin/python" -m pip install -q -c "$CONSTRAINTS" -r "$req" \
    2> >(grep -v "^WARNING: Location" >&2)
  "$env/bin/python" -m pip check
  touch "$env/.complete"
  # older builds of the same version are stale now
  for old in "$CACHE/verl-$version-"*; do
    [ "$old" = "$env" ] || rm -rf "$old"
  done
  echo "verl $version: built in $((SECONDS - start)) s"
done
