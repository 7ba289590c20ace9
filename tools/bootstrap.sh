#!/usr/bin/env bash
# Set up everything on a machine that has only Python 3.11, then run the demo or the tests.
#   bash tools/bootstrap.sh demo [demo args]    # install, then ViT-5-S + UperNet on a generated image
#   bash tools/bootstrap.sh test [pytest args]  # install with test extras, then the test suite
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:?usage: bash tools/bootstrap.sh demo|test [args]}
shift
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
# The pinned torch is its CUDA build: a first install makes .venv about 6.4 GB. Say so
# before pip fills the disk halfway (VIT5SEG_BOOTSTRAP_NEED_MB=0 skips the check).
need_mb=${VIT5SEG_BOOTSTRAP_NEED_MB:-6200}
if ! compgen -G ".venv/lib/python*/site-packages/torch" >/dev/null; then
  free_mb=$("$python" -c 'import shutil; print(shutil.disk_usage(".").free // 2**20)')
  if [ "$free_mb" -lt "$need_mb" ]; then
    echo "bootstrap: $PWD has $free_mb MB free; the install needs about $need_mb MB there" \
         "(torch's CUDA build): free some space, or set VIT5SEG_BOOTSTRAP_NEED_MB=0 to try anyway" >&2
    exit 1
  fi
fi
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
