// composer::functional: the algorithms as plain functions for hand-written training loops (Composer's
// composer.functional): apply_blurpool, cutmix_batch, smooth_labels, mixup_batch, ...
#pragma once

#include "composer/algorithms/algorithms.h"
