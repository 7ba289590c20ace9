# Sourced by dist_train.sh, dist_test.sh, slurm_train.sh and slurm_test.sh: the Python that runs
# vit5seg, so that a launcher never starts one that has no vit5seg (whatever `python` is on PATH).
# $PYTHON where set; else the clone's .venv (the README's and bootstrap.sh's); else python3 or
# python on PATH. The first that finds vit5seg wins; none is one line that says what to do.
vit5seg_python() {  # TOOLS_DIR
  local candidates=() candidate
  if [ -n "${PYTHON:-}" ]; then
    candidates=("$PYTHON")
  else
    candidates=("$1/../.venv/bin/python" "$(command -v python3 || true)" "$(command -v python || true)")
  fi
  for candidate in "${candidates[@]}"; do
    # from / : the working folder is not on a launched tool's path, so it must not count here
    if [ -n "$candidate" ] && [ -x "$candidate" ] && (cd / && "$candidate" -c \
         'import importlib.util, sys; sys.exit(importlib.util.find_spec("vit5seg") is None)' 2>/dev/null); then
      echo "$candidate"
      return 0
    fi
  done
  echo "$(basename "$0"): no Python here finds vit5seg (tried: ${candidates[*]}); activate the environment" \
       "it is installed in, or set PYTHON=/path/to/its/python" >&2
  return 1
}
