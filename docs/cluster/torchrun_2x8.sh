#!/bin/bash
# RE-RAG on 2 nodes x 8 GPUs without a scheduler: run this on each node, NODE_RANK=0 on the first.
#   MASTER_ADDR=node0.example NODE_RANK=0 bash docs/cluster/torchrun_2x8.sh
#   MASTER_ADDR=node0.example NODE_RANK=1 bash docs/cluster/torchrun_2x8.sh
# torchrun starts 8 processes per node and sets the ranks; Lightning reads them (TorchElasticEnvironment).
set -euo pipefail
torchrun --nnodes 2 --nproc-per-node 8 --node-rank "${NODE_RANK:?}" \
    --master-addr "${MASTER_ADDR:?}" --master-port "${MASTER_PORT:-29500}" \
    -m rerag fit --config configs/nq_t5_base.yaml \
    --trainer.num_nodes 2 --trainer.devices 8 --trainer.accumulate_grad_batches 2
