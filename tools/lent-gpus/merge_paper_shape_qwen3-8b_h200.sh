#!/bin/bash
# The 8B entry (2 x H200, vLLM 0.25.1, optimizer_offload: true) from its attempts of 2026-11-27:
# attempt 1 ran the proposer stage and paused at its deadline; attempt 2 went on with generation
# and scoring, trained the solver and reached its command's limit while saving it; attempt 3
# went on in the same run folder (its entry holds attempts 1-2's stages) and ran the solver
# again, the metrics and the evaluation; attempt 4 (a fresh run folder, `vdlib plan --measure
# --skip proposer,generate,score,solver`: the random-init checkpoint stands in for the trained
# solver) ran the metrics and the evaluation again with nothing else on the cards.
# (attempt N of the text is the member qwen3-*_h200_runN.* of the archive)
set -e
cd "$(dirname "$0")/../.."
R=docs/results/archives/paper_shape.zip  # its members read in place (vdlib.utils.archive)
python benchmarks/paper_shape.py --merge benchmarks/results/cost_entries/qwen3-8b_h200_2gpu.json \
 --take setup,proposer,generate,score,curriculum,solver=$R/qwen3-8b_h200_run3.json \
 --take metrics,evaluate=$R/qwen3-8b_h200_run4.json \
 --correction "solver: attempt 2 trained the solver's two steps, then its command reached the 10-minute limit while saving the 8B model's fp32 masters (33 GB); attempt 3 (same run folder, fresh counters) ran the solver again" \
 --correction "proposer and solver: optimizer_offload (AdamW's fp32 masters and moments in CPU memory; vdlib/loop/offload.py): step_s includes the offloaded update on the CPU and the transfers, not timed apart (the 4B shape, AdamW on the GPU: proposer 40.5 s, solver 26.4 s a step)" \
 --correction "metrics, evaluate: attempt 4, nothing else on the cards (evaluation 2,528 tokens/s; attempt 3: 2,437). Attempt 3's GPU-0 peaks there (61.1 and 118.0 GiB) held the offloaded optimizer, which its gradient hooks kept alive; fixed since (the hooks hold it weakly, tests/test_offload.py)"
python benchmarks/cost_table.py --write
python benchmarks/paper_shape.py benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json \
 benchmarks/results/cost_entries/qwen3-8b_h200_2gpu.json
