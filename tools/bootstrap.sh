#!/usr/bin/env bash
# Set up everything on a machine that has only Python 3.11, then run the demo or the tests.
#   bash tools/bootstrap.sh demo [demo args]    # install, then ViT-5-S + UperNet on a generated image
#   bash tools/bootstrap.sh test [pytest args]  # install with test extras, then the test suite
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:?usage: bash tools/bootstrap.sh demo|test [args]}
shift
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv/bin/python ] || "$python" -m venv .venv
extras=""
[ "$job" = test ] && extras="[tests]"
if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".$extras" >.venv/pip.log 2>&1; then
  grep -v 'is ignored: it is neither' .venv/pip.log >&2
  echo "bootstrap: pip install failed (full log: .venv/pip.log)" >&2
  exit 1
fi
# Two cores: torch's threads must not fight dataloader workers (30x slower seen here).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
case "$job" in
  demo) exec .venv/bin/python -m vit5seg.demo "$@" ;;
  test) exec .venv/bin/python -m pytest "$@" ;;
  *) echo "unknown job '$job': use demo or test" >&2; exit 2 ;;
esac
