// Loading at Trainer construction: autoresume from save_folder, else load_path.
#pragma once

#include "trainer/detail/trainer_impl.h"

namespace composer::detail {

/// Runs between BEFORE_LOAD and AFTER_LOAD. Autoresume tries save_folder's checkpoints newest first (the latest
/// link's target, then by batch number), setting unreadable files aside as <name>.corrupt with a message; if none
/// loads it falls back to load_path. Throws CheckpointError naming the file when load_path cannot be applied.
void load_checkpoints(TrainerImpl& t);

}  // namespace composer::detail
