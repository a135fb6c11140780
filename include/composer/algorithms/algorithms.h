// Every speed-up algorithm: the Algorithm classes (composer::algorithms), their functional forms
// (composer::functional), module surgery and the registry.
#pragma once

#include "composer/algorithms/augmentation_primitives.h"
#include "composer/algorithms/augmix.h"
#include "composer/algorithms/blurpool.h"
#include "composer/algorithms/channels_last.h"
#include "composer/algorithms/colout.h"
#include "composer/algorithms/cutmix.h"
#include "composer/algorithms/cutout.h"
#include "composer/algorithms/factorize.h"
#include "composer/algorithms/ghost_batchnorm.h"
#include "composer/algorithms/gradient_clipping.h"
#include "composer/algorithms/label_smoothing.h"
#include "composer/algorithms/mixup.h"
#include "composer/algorithms/module_surgery.h"
#include "composer/algorithms/progressive_resizing.h"
#include "composer/algorithms/randaugment.h"
#include "composer/algorithms/registry.h"
#include "composer/algorithms/seq_length_warmup.h"
#include "composer/algorithms/squeeze_excite.h"
#include "composer/algorithms/stochastic_depth.h"
#include "composer/algorithms/weight_standardization.h"
