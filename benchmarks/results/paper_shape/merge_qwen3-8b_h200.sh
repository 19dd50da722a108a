#!/bin/bash
# The 8B entry of 2026-11-27 (2 x H200, vLLM 0.25.1, optimizer_offload: true) from its attempts:
# attempt 1 ran the proposer stage and paused at its deadline; attempt 2 went on with generation
# and scoring, trained the solver and reached its command's limit while saving it; attempt 3
# went on in the same run folder (its entry holds attempts 1-2's stages) and ran the solver
# again, the metrics and the evaluation.
set -e
cd "$(dirname "$0")/../../.."
R=benchmarks/results/paper_shape
python benchmarks/paper_shape.py --merge benchmarks/results/cost_entries/qwen3-8b_h200_2gpu.json \
 --take setup,proposer,generate,score,curriculum,solver,metrics,evaluate=$R/qwen3-8b_h200_attempt3.json \
 --drop-peaks metrics,evaluate \
 --correction "memory: GPU 0's peaks in metrics (61.1 GiB) and evaluate (118.0) include 61.1 GiB that stayed held after the solver's stage: the offloaded optimizer's gradient hooks (in the parameters' C++ side, out of the garbage collector's sight) kept the optimizer alive, and with it the policy's bf16 weights and fp32 gradient sums (45.8 GiB) and the CUDA cache segments around them; the stages' own peaks are about 0 and 57 GiB (GPU 1's evaluation peak: 56.8). Fixed after this run: the hooks hold the optimizer weakly (tests/test_offload.py)" \
 --correction "solver: attempt 2 trained the solver's two steps, then its command reached the 10-minute limit while saving the 8B model's fp32 masters (33 GB); attempt 3 (same run folder, fresh counters) ran the solver again" \
 --correction "proposer and solver: optimizer_offload (AdamW's fp32 masters and moments in CPU memory; vdlib/loop/offload.py): step_s includes the offloaded update on the CPU and the transfers, not timed apart (the 4B shape, AdamW on the GPU: proposer 40.5 s, solver 26.4 s a step)"
python benchmarks/cost_table.py --write
python benchmarks/paper_shape.py benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json \
 benchmarks/results/cost_entries/qwen3-8b_h200_2gpu.json
