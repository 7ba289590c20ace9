#!/usr/bin/env bash
# Multi-GPU (or multi-process CPU) training on one node: tools/dist_train.sh CONFIG GPUS [train.py args]
# NNODES, NODE_RANK, PORT and MASTER_ADDR select a multi-node run, as in mmseg.
# Any GPU count keeps the config's images per iteration (16 for ADE20K) by gradient accumulation;
# --accumulate 1 after the config trains GPUS x batch images per iteration instead.
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
DIR=$(cd "$(dirname "$0")" && pwd)
. "$DIR/python.sh"
PYTHON=$(vit5seg_python "$DIR")
exec "$PYTHON" -m torch.distributed.run --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
  --nproc_per_node="$GPUS" --master_port="$PORT" "$DIR/train.py" "$CONFIG" --launcher pytorch --accumulate auto "${@:3}"
