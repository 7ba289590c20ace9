#!/usr/bin/env bash
# Slurm: tools/slurm_train.sh PARTITION JOB_NAME CONFIG [GPUS=8] [train.py args]
# GPUS_PER_NODE (8), CPUS_PER_TASK (5) and SRUN_ARGS tune the allocation.
# Any GPU count keeps the config's images per iteration by gradient accumulation (--accumulate 1: no).
set -euo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
DIR=$(cd "$(dirname "$0")" && pwd)
. "$DIR/python.sh"
PYTHON=$(vit5seg_python "$DIR")
# shellcheck disable=SC2086
srun -p "$PARTITION" --job-name="$JOB_NAME" --gres=gpu:"$GPUS_PER_NODE" --ntasks="$GPUS" \
  --ntasks-per-node="$GPUS_PER_NODE" --cpus-per-task="$CPUS_PER_TASK" --kill-on-bad-exit=1 $SRUN_ARGS \
  "$PYTHON" -u "$DIR/train.py" "$CONFIG" --launcher slurm --accumulate auto "${@:4}"
