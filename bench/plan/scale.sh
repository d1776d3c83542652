#!/usr/bin/env bash
# topo plan from 8 to 32,768 GPUs, before and after side by side: see ../scale.sh.
#   BEFORE_BIN=/path/to/old/topo bench/plan/scale.sh
exec "$(dirname "$0")/../scale.sh" plan "$@"
