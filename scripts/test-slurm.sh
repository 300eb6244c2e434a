#!/bin/bash
# Slurm integration test of a build: brings up a private loopback Slurm,
# runs the build's dbuf-shard with srun and through the sbatch template, then
# on two Slurm nodes, and always tears down (scripts/slurm/test-slurm.sh).
#   scripts/test-slurm.sh BUILD_DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: test-slurm.sh BUILD_DIR}
exec "$top/scripts/slurm/test-slurm.sh" "$build/dbuf-shard"
