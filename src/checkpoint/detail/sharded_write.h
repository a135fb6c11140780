// A sharded (DCP) checkpoint's save in three steps, so that its files can be written in the background
// (CheckpointSaverOptions::save_async): prepare (every rank, at the save point), write (any thread: this rank's
// file), finish (every rank, at one point: the records gathered, rank 0 writes .metadata).
// save_distributed_checkpoint runs the three at once.
#pragma once

#include "composer/core/state.h"

#include <ATen/core/ivalue.h>

#include <memory>
#include <optional>
#include <string>

namespace composer::detail {

struct PreparedRankFile;

/// What this rank saves of `state` (its parts of the sharded tensors; on rank 0 also the whole values); with `copy`,
/// every tensor copied to host memory, so that training may go on while it is written.
std::shared_ptr<const PreparedRankFile> prepare_rank_file(const State& state, bool weights_only,
                                                          const std::optional<c10::IValue>& rng, bool copy);
/// Writes this rank's file into `dir` (created) crash-safely; returns its records (for finish_rank_files).
std::string write_prepared_rank_file(const PreparedRankFile& prepared, const std::string& dir);
/// Every rank, at the same point, with what write_prepared_rank_file returned or, where it failed, its `error`: once
/// every rank's file is complete rank 0 writes `dir`/.metadata; a rank's error is thrown on every rank, naming it.
void finish_rank_files(const std::string& dir, const std::string& records, const std::string& error);

}  // namespace composer::detail
