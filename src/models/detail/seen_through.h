// The layer of a given type that a layer is or stands in for: FSDP's units, activation checkpointing, sequence
// parallelism and the activation monitor wrap layers (nn::Layer::stands_in_for) without changing what they compute,
// so a model that reaches into its blocks (the key-value cache, the tied head) looks through them.
#pragma once

#include "composer/nn/layer.h"

namespace composer::models::detail {

template <class T>
T* seen_through(const nn::Layer& layer) {
  for (nn::Layer* l = const_cast<nn::Layer*>(&layer); l; l = l->stands_in_for())
    if (auto* t = dynamic_cast<T*>(l)) return t;
  return nullptr;
}

}  // namespace composer::models::detail
