#!/usr/bin/env bash
# Multi-GPU testing on one node: tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py args]
set -euo pipefail
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
DIR=$(cd "$(dirname "$0")" && pwd)
. "$DIR/python.sh"
PYTHON=$(vit5seg_python "$DIR")
exec "$PYTHON" -m torch.distributed.run --nnodes="$NNODES" --node_rank="$NODE_RANK" --master_addr="$MASTER_ADDR" \
  --nproc_per_node="$GPUS" --master_port="$PORT" "$DIR/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
