#!/bin/bash
# The 4B entry of 2026-11-27 (2 x H200, vLLM 0.25.1) from its attempts (see README.md here):
# attempt 2 went on from attempt 1's partial entry (proposer, generate) and ran scoring; it ran
# out of memory in the solver beside a server orphaned by attempt 1; attempt 3 went on in the
# same run folder and ran the solver, metrics and the evaluation.
set -e
cd "$(dirname "$0")/../../.."
R=benchmarks/results/paper_shape
python benchmarks/paper_shape.py --merge benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json \
 --take setup,proposer,generate,score=$R/qwen3-4b_h200_attempt2.json \
 --take solver,metrics,evaluate=$R/qwen3-4b_h200_attempt3.json \
 --assume-tokens generate=131072 --drop-peaks setup,generate,score,metrics,evaluate \
 --correction "generate: the token counter hooked ServerEngine.generate, which curriculum generation does not call (it calls generate_batches); 64 questions x 2,048 tokens assumed (dummy weights run to the limit: the proposer's rollouts averaged 2,037 of 2,048), so the rate is an upper bound. Fixed after this run: the counter hooks generate_batches" \
 --correction "memory: GPU 0's peaks in setup (56.8 GiB) and score (113.7) include 56.8 GiB of a vLLM server orphaned when attempt 1's command was killed at its 10-minute limit (pid 3902 in attempt 2's OOM message); the score stage's own GPU-0 peak is about 56.9 GiB. Fixed after this run: servers die with their parent (PR_SET_PDEATHSIG) and --measure refuses busy GPUs" \
 --correction "memory: GPU 0's peaks in generate (120.7 GiB), metrics (64.3) and evaluate (121.1) include about 64 GiB (= 4B parameters x 16 bytes: fp32 weights, gradients, Adam) that the trainer process kept in PyTorch's CUDA cache after its GRPO stage; the stages' own peaks are about 56.8, 0.5 and 57 GiB. Fixed after this run: the loop collects garbage and empties the CUDA cache after every stage" \
 --correction "solver: attempt 2 ran out of memory beside the orphaned server; attempt 3 (same run folder, fresh counters) ran the solver, metrics and evaluation with nothing else on the GPUs"
python benchmarks/cost_table.py --write
python benchmarks/paper_shape.py benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json
