#pragma once

namespace composer {

/// Sets LibTorch's intra-op thread count: `n` if > 0, else $OMP_NUM_THREADS if set, else the cores divided by
/// $LOCAL_WORLD_SIZE (ranks launched on the same node share its cores).
/// (Debian's LibTorch starts with 1 thread.) Returns the count in effect.
int configure_threads(int n = 0);

}  // namespace composer
