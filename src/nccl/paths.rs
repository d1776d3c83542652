//! Path types and bandwidths between every pair of nodes (`src/graph/paths.cc`).
