#!/usr/bin/env bash
# The peers' virtualenvs for bench/peers.py, each with its current release (never vendored here):
#   bench/peers_venvs.sh [DIR]      (default: $PEERS_VENVS, else ./.peers-venvs)
# then: python bench/peers.py --venvs DIR
set -euo pipefail
dir="${1:-${PEERS_VENVS:-.peers-venvs}}"
py="${PYTHON:-python3}"
mkdir -p "$dir"
[ -x "$dir/inspect/bin/inspect" ] || {
  "$py" -m venv "$dir/inspect"
  "$dir/inspect/bin/pip" install -q inspect_ai openai
}
[ -x "$dir/vf04/bin/vf-eval" ] || {
  "$py" -m venv "$dir/vf04"
  "$dir/vf04/bin/pip" install -q "verifiers==0.4.*"
}
echo "peers' virtualenvs in $dir: python bench/peers.py --venvs $dir"
