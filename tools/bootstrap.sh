#!/usr/bin/env bash
# Set up everything on a machine that has Python 3.11 (and 3.12 for the tests' second
# environment), then run the demo or the tests.
#   bash tools/bootstrap.sh demo [demo args]    # install, then the tiny ViT-5 + UperNet on synthetic data
#   bash tools/bootstrap.sh test [pytest args]  # the suite in the locked environment, then the fast tier in a second one
#
# The locked environment (.venv, Python 3.11) is the exact tested set: pyproject.toml's
# ranges constrained by requirements/lock.txt. The second one (.venv-second) is a user's: Python
# 3.12 with the oldest torch and timm pyproject.toml admits already installed
# (requirements/second-env.txt), into which the sdist's wheel is installed like any package,
# keeping that torch. Without a Python 3.12 it says so in one line and is skipped (CI sets
# VIT5SEG_REQUIRE_SECOND_ENV=1, which makes that an error); VIT5SEG_SECOND_ENV=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
job=${1:?usage: bash tools/bootstrap.sh demo|test [args]}
shift
case "$job" in demo|test) ;; *) echo "unknown job '$job': use demo or test" >&2; exit 2 ;; esac
python=${PYTHON:-$(command -v python3.11 || command -v python3)}

# Each torch is its CUDA build: about 6.4 GB a venv. Say so before pip fills the disk
# halfway (VIT5SEG_BOOTSTRAP_NEED_MB=0 skips the check).
need_space() {  # VENV
  local need_mb=${VIT5SEG_BOOTSTRAP_NEED_MB:-6200} free_mb
  compgen -G "$1/lib/python*/site-packages/torch" >/dev/null && return 0
  free_mb=$("$python" -c 'import shutil; print(shutil.disk_usage(".").free // 2**20)')
  if [ "$free_mb" -lt "$need_mb" ]; then
    echo "bootstrap: $PWD has $free_mb MB free; the install needs about $need_mb MB there" \
         "(torch's CUDA build): free some space, or set VIT5SEG_BOOTSTRAP_NEED_MB=0 to try anyway" >&2
    exit 1
  fi
}

pip_quiet() {  # VENV LOG pip-args...: pip's output only if it fails
  local venv=$1 log=$2
  shift 2
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >"$log" 2>&1; then
    grep -v 'is ignored: it is neither' "$log" >&2
    echo "bootstrap: pip install failed (full log: $log)" >&2
    exit 1
  fi
}

need_space .venv
if [ ! -x .venv/bin/python ] && ! "$python" -m venv .venv >/dev/null 2>.venv-error.log; then
  # Debian and Ubuntu ship venv apart from Python: say which package, not ensurepip's traceback
  echo "bootstrap: $python cannot make a virtual environment ($(tail -n 1 .venv-error.log));" \
       "on Debian/Ubuntu: sudo apt install python3-venv" >&2
  rm -rf .venv .venv-error.log
  exit 1
fi
rm -f .venv-error.log
extras=""
[ "$job" = test ] && extras="[tests]"
pip_quiet .venv .venv/pip.log -c requirements/lock.txt -e ".$extras"
# an editable install's wheel carries no .pth of its own: the mmcv._ext hint beside it (vit5seg_mmcv_hint.py)
.venv/bin/python vit5seg_mmcv_hint.py >/dev/null
# mmdet's panoptic dataset and metric import panopticapi; the registries carry it as panopticapi-lite, whose
# metadata pins numpy<2 that its code does not need (docs/panoptic.md): installed without its dependencies
pip_quiet .venv .venv/pip.log -c requirements/lock.txt --no-deps panopticapi-lite
# Two cores: torch's threads must not fight dataloader workers (30x slower seen here).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
[ "$job" = demo ] && exec .venv/bin/python -m vit5seg.demo "$@"

status=0
.venv/bin/python -m pytest "$@" || status=$?
[ "${VIT5SEG_SECOND_ENV:-1}" = 0 ] && exit "$status"

# --- the second environment: another Python, another torch, a regular install ---------
second=.venv-second
python2=${PYTHON_SECOND:-}
# else a python3.12 that runs (a pyenv shim exists even where 3.12 is not an active version)
for candidate in python3.12 $(pyenv root 2>/dev/null)/versions/3.12*/bin/python3.12; do
  [ -z "$python2" ] || break
  if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    python2=$candidate
  fi
done
if [ -z "$python2" ]; then
  if [ "${VIT5SEG_REQUIRE_SECOND_ENV:-0}" = 1 ]; then  # .ci/run: CI runs both environments
    echo "bootstrap: the second test environment needs python3.12 (or PYTHON_SECOND=/path/to/python)" >&2
    exit 1
  fi
  echo "second environment: skipped, no Python 3.12 here (install python3.12, e.g. with pyenv or uv, or set" \
       "PYTHON_SECOND=/path/to/python3.12; CI runs it)"
  exit "$status"
fi
need_space "$second"
[ -x "$second/bin/python" ] || "$python2" -m venv "$second"
pip_quiet "$second" "$second/pip.log" -r requirements/second-env.txt build
before=$("$second/bin/python" -c 'import torch; print(torch.__version__)')
dist=$(mktemp -d)
if ! "$second/bin/python" -m build --outdir "$dist" . >"$second/build.log" 2>&1; then  # the sdist, then its wheel
  cat "$second/build.log" >&2
  echo "bootstrap: building the sdist and its wheel failed (log: $second/build.log)" >&2
  exit 1
fi
wheel=$(ls "$dist"/vit5seg-*.whl)
pip_quiet "$second" "$second/pip-vit5seg.log" --force-reinstall --no-deps "$wheel"
pip_quiet "$second" "$second/pip-vit5seg.log" "$wheel[tests]"
pip_quiet "$second" "$second/pip-vit5seg.log" --no-deps "$(grep '^panopticapi-lite==' requirements/lock.txt)"
rm -rf "$dist"
after=$("$second/bin/python" -c 'import torch; print(torch.__version__)')
if [ "$before" != "$after" ]; then
  echo "bootstrap: installing vit5seg replaced the environment's torch $before with $after" >&2
  exit 1
fi
# from / : the clone's own vit5seg folder must not stand in for the installed one
second_python="$PWD/$second/bin/python"
echo "second environment: $(cd / && "$second_python" -c 'import platform, torch, timm, vit5seg.paths as p;
print(f"Python {platform.python_version()}, torch {torch.__version__}, timm {timm.__version__}, vit5seg {p.install_kind()} install")')"
# from tests/: the installed vit5seg is imported, not the clone's
(cd tests && "../$second/bin/python" -m pytest -c ../pyproject.toml --rootdir .. -m 'not slow or install' "$@") || status=$?
exit "$status"
