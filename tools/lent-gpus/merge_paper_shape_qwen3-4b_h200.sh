#!/bin/bash
# The 4B entry (2 x H200, vLLM 0.25.1) from its attempts of 2026-11-27 (logs in docs/results/archives/paper_shape.zip):
# attempt 1 ran the proposer stage (its counters went on in attempt 2's entry); attempt 2 ran
# scoring beside a server orphaned by attempt 1 and ran out of memory in the solver; attempt 3
# (same run folder) ran the solver, metrics and evaluation; attempt 4 (a fresh run folder,
# `vdlib plan --measure --skip proposer`: the random-init checkpoint stands in for the trained
# proposer; two commands, 4a paused in the solver and 4b went on) ran generation, scoring, the
# solver, metrics and evaluation again with nothing else on the cards; attempt 5 (a fresh run
# folder, --skip proposer,generate,score,solver) ran metrics and evaluation again with no
# trained stage before them, for clean peaks (attempt 4's carried the solver's leftover).
# (attempt N of the text is the member qwen3-*_h200_runN.* of the archive)
set -e
cd "$(dirname "$0")/../.."
R=docs/results/archives/paper_shape.zip  # its members read in place (vdlib.utils.archive)
python benchmarks/paper_shape.py --merge benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json \
 --take proposer=$R/qwen3-4b_h200_run2.json \
 --take solver=$R/qwen3-4b_h200_run3.json \
 --take setup,generate,score,curriculum=$R/qwen3-4b_h200_run4.json \
 --take metrics,evaluate=$R/qwen3-4b_h200_run5.json \
 --correction "proposer: attempt 1's run (its counters and peaks carried in attempt 2's entry)" \
 --correction "solver: attempt 3, 26.4 s a step; attempt 4 trained the same two steps at 31.4 s a step with the same peak (128.7 GiB on GPU 0)" \
 --correction "generate, score: attempt 4, nothing else on the cards; generation's tokens counted (4,764 tokens/s; attempts 1-2 hooked the wrong call and assumed 131,072 tokens: 4,923, an upper bound)" \
 --correction "metrics, evaluate: attempt 5, with no trained stage before them (3,404 tokens/s; peaks 57.6 / 56.8 GiB). In attempt 4, GPU 0's peaks in metrics (23.7 GiB) and evaluate (80.5) included about 23 GiB held after the solver's stage by the model of TRL's colocated vLLM engine, which stays reachable after its shutdown (vdlib.engines.setting reports it: on a Qwen3-0.6B-shaped run 1.3 GiB stayed allocated in vLLM's linear and embedding layers after the solver, leak_probe_qwen3-0.6b_h200.log, and again with the first fix, leak_probe2_qwen3-0.6b_h200.log)"
python benchmarks/cost_table.py --write
python benchmarks/paper_shape.py benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json \
 benchmarks/results/cost_entries/qwen3-8b_h200_2gpu.json
