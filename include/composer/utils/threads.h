#pragma once

namespace composer {

/// Sets LibTorch's intra-op thread count: `n` if > 0, else $OMP_NUM_THREADS if set, else every core.
/// (Debian's LibTorch starts with 1 thread.) Returns the count in effect.
int configure_threads(int n = 0);

}  // namespace composer
