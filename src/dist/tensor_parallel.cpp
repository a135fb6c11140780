// Tensor parallelism's plan and its application to a model: which Linear layers split, how each parameter's part is
// cut from the whole tensor and put back together.
#include "composer/dist/tensor_parallel.h"

#include "composer/dist/sharded_state.h"

#include "composer/nn/deferred_init.h"
#include "composer/nn/layer.h"
#include "composer/nn/layers.h"
#include "dist/detail/parallel_linear.h"
#include "dist/detail/sequence_parallel.h"
#include "dist/detail/vocabulary_parallel.h"
#include "nn/detail/deferred_narrow.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <sstream>
#include <stdexcept>

namespace composer::dist {
namespace {

std::vector<std::string> components(const std::string& name) {
  std::vector<std::string> out;
  std::stringstream in(name);
  for (std::string part; std::getline(in, part, '.');) out.push_back(part);
  return out;
}

// '*' matches one dotted component.
bool matches(const std::string& pattern, const std::string& name) {
  const auto p = components(pattern), n = components(name);
  if (p.size() != n.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != "*" && p[i] != n[i]) return false;
  return true;
}

// The split of a weight whose split dimension has `features` features that `entry` asks for over `degree` ranks;
// std::invalid_argument naming the module when they do not divide.
TensorParallelSplit split_for(const nn::ParallelLayerPlan& entry, int64_t dim, int64_t features,
                              const std::string& name, int64_t degree, int64_t rank) {
  TensorParallelSplit s;
  s.dim = dim;
  s.chunks = std::max<int64_t>(entry.chunks, 1);
  s.degree = degree;
  s.rank = rank;
  const int64_t granule = std::max<int64_t>(entry.granule, 1);
  if (features % s.chunks != 0 || (features / s.chunks) % (degree * granule) != 0) {
    std::ostringstream os;
    os << "parallelism_config.tp.tensor_parallel_degree " << degree << " does not split " << name << " ("
       << to_string(entry.style) << "): its " << features << (dim == 0 ? " output" : " input") << " features";
    if (s.chunks > 1) os << " (" << s.chunks << " blocks)";
    if (granule > 1) os << " are " << features / granule << " heads of " << granule;
    os << " and each rank's slice must be whole" << (granule > 1 ? " heads" : " features")
       << "; pick a degree that divides them";
    throw std::invalid_argument(os.str());
  }
  return s;
}

std::string not_splittable(const nn::ParallelLayerPlan& entry, const std::string& full, const std::string& what) {
  return "parallelism_config.tp: layer_plan entry '" + entry.name + "' matches " + full + ", which is not a " +
         "composer::nn::Linear (or, rowwise, a composer::nn::Embedding) child of a composer::nn::Composite (a " + what +
         ")";
}

// A reader of elements [offset, offset + numel) of this rank's part's flattening, from a reader of the whole
// tensor's: in runs that end where the part's slice of the split dimension does (one run for a split of the first
// dimension; a run per row for the second).
nn::PartReader part_reader(const TensorParallelSplit& split, const std::vector<int64_t>& shape, nn::PartReader whole) {
  const auto dim = static_cast<size_t>(split.dim);
  int64_t inner = 1;
  for (size_t i = dim + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t block = shape[dim] / split.chunks, slice = block / split.degree, local = slice * split.chunks;
  return [=](int64_t offset, int64_t numel) {
    if (numel == 0) return whole(0, 0);
    std::vector<at::Tensor> runs;
    for (int64_t at = offset, end = offset + numel; at < end;) {
      const int64_t i = at % inner, j = (at / inner) % local, outer = at / (inner * local), in_slice = j % slice;
      const int64_t run = std::min(end - at, (slice - in_slice) * inner - i);
      const int64_t whole_j = (j / slice) * block + split.rank * slice + in_slice;
      runs.push_back(whole((outer * shape[dim] + whole_j) * inner + i, run));
      at += run;
    }
    return runs.size() == 1 ? runs[0] : at::cat(runs);
  };
}

// Narrows `p` to this rank's part: now, or, when its initialization is deferred, when it is materialized (drawn
// whole as in a build without the split, this part kept; read from a pretrained file by parts when FSDP asks).
void keep_local(at::Tensor& p, const TensorParallelSplit& split) {
  if (nn::is_deferred(p)) {
    const auto local = split.local_of(at::empty(p.sizes(), p.options().device(c10::kMeta))).sizes().vec();
    nn::detail::narrow_deferred(
        p, local, [split](const at::Tensor& whole) { return split.local_of(whole); },
        [split, shape = p.sizes().vec()](nn::PartReader whole) { return part_reader(split, shape, std::move(whole)); });
    return;
  }
  p.set_data(split.local_of(p.detach()));
}

// Narrows `linear`'s weight (and a column-parallel bias) to this rank's slice; returns the layer that replaces it.
std::shared_ptr<nn::Layer> split_linear(nn::Linear& linear, const nn::ParallelLayerPlan& entry, const std::string& full,
                                        const Group& group, const TPOptions& options,
                                        std::vector<SplitParameter>& out) {
  const int64_t dim = entry.style == nn::ParallelStyle::COLWISE ? 0 : 1;
  const TensorParallelSplit split =
      split_for(entry, dim, dim == 0 ? linear.out_features : linear.in_features, full, group.size(), group.rank());
  keep_local(linear.weight, split);
  out.push_back({full + ".weight", linear.weight, split});
  if (linear.bias.defined() && split.dim == 0) {
    keep_local(linear.bias, split);
    out.push_back({full + ".bias", linear.bias, split});
  }
  if (entry.vocabulary_head && dim == 0) {
    return std::make_shared<detail::ParallelHead>(linear, group, options.loss_parallel(), options.sequence_parallel());
  }
  return std::make_shared<detail::ParallelLinear>(linear, entry.style, group, options.sequence_parallel());
}

// Narrows `table`'s rows (the vocabulary) to this rank's; returns the layer that replaces it.
std::shared_ptr<nn::Layer> split_embedding(nn::Embedding& table, const nn::ParallelLayerPlan& entry,
                                           const std::string& full, const Group& group, const TPOptions& options,
                                           std::vector<SplitParameter>& out) {
  if (entry.style != nn::ParallelStyle::ROWWISE) {
    throw std::invalid_argument("parallelism_config.tp: layer_plan entry '" + entry.name + "' splits the embedding " +
                                full + " colwise; an embedding splits rowwise (its rows, the vocabulary)");
  }
  const int64_t rows = table.weight.size(0);
  if (rows % group.size() != 0) {
    throw std::invalid_argument("parallelism_config.tp.tensor_parallel_degree " + std::to_string(group.size()) +
                                " does not split " + full + " (rowwise): its " + std::to_string(rows) +
                                " rows (the vocabulary) must divide equally; pick a degree that divides them or "
                                "leave the embedding out of the layer_plan");
  }
  TensorParallelSplit split;
  split.degree = group.size();
  split.rank = group.rank();
  keep_local(table.weight, split);
  out.push_back({full + ".weight", table.weight, split});
  return std::make_shared<detail::ParallelEmbedding>(table, group, options.loss_parallel(),
                                                     options.sequence_parallel());
}

}  // namespace

TensorParallelPlan default_tensor_parallel_plan(const torch::nn::Module& model) {
  TensorParallelPlan plan;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    const auto* described = dynamic_cast<const nn::TensorParallelizable*>(item.value().get());
    if (!described) continue;
    for (auto entry : described->tensor_parallel_plan()) {
      if (!item.key().empty()) entry.name = item.key() + "." + entry.name;
      plan.push_back(std::move(entry));
    }
  }
  if (plan.empty()) {
    throw std::invalid_argument(
        "parallelism_config.tp: the model (" + model.name() +
        ") has no module that describes its tensor-parallel split (the model zoo's Llama, GPT-2 and BERT blocks do); "
        "give TPOptions::layer_plan with the Linear layers to split");
  }
  return plan;
}

at::Tensor TensorParallelSplit::local_of(const at::Tensor& whole) const {
  const int64_t block = whole.size(dim) / chunks, slice = block / degree;
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < chunks; ++b) parts.push_back(whole.narrow(dim, b * block + rank * slice, slice));
  return at::cat(parts, dim).contiguous();
}

at::Tensor TensorParallelSplit::whole_of(const std::vector<at::Tensor>& parts) const {
  const int64_t slice = parts.at(0).size(dim) / chunks;
  std::vector<at::Tensor> pieces;
  for (int64_t b = 0; b < chunks; ++b)
    for (const auto& part : parts) pieces.push_back(part.narrow(dim, b * slice, slice));
  return at::cat(pieces, dim);
}

std::vector<int64_t> piece_shape(const std::vector<int64_t>& shape, const std::optional<TensorParallelSplit>& piece) {
  std::vector<int64_t> out = shape;
  if (piece) out[static_cast<size_t>(piece->dim)] /= piece->degree;
  return out;
}

// The layer standing in for `layer` under a SEQUENCE, SEQUENCE_START or SEQUENCE_END entry: with sequence parallelism
// on, the norm on the slice or the region's boundary; otherwise the layer itself.
std::shared_ptr<nn::Layer> sequence_layer(std::shared_ptr<nn::Layer> layer, nn::ParallelStyle style, const Group& group,
                                          const TPOptions& options) {
  if (!options.sequence_parallel()) return layer;
  if (style == nn::ParallelStyle::SEQUENCE) return std::make_shared<detail::SequenceParallelLayer>(layer, group);
  return std::make_shared<detail::SequenceBoundaryLayer>(layer, group, style == nn::ParallelStyle::SEQUENCE_START);
}

bool is_sequence_style(nn::ParallelStyle style) {
  return style == nn::ParallelStyle::SEQUENCE || style == nn::ParallelStyle::SEQUENCE_START ||
         style == nn::ParallelStyle::SEQUENCE_END;
}

// Where the plan marks the region's start (GPT-2's), the split embedding and vocabulary head stay outside it: they
// all-reduce and take the whole sequence.
TPOptions vocabulary_options(const TensorParallelPlan& plan, const TPOptions& options) {
  TPOptions out = options;
  for (const auto& entry : plan)
    if (entry.style == nn::ParallelStyle::SEQUENCE_START) out.sequence_parallel(false);
  return out;
}

std::vector<SplitParameter> parallelize(torch::nn::Module& model, const Group& group, const TPOptions& options) {
  const TensorParallelPlan plan = options.layer_plan() ? *options.layer_plan() : default_tensor_parallel_plan(model);
  const TPOptions vocabulary = vocabulary_options(plan, options);
  std::vector<SplitParameter> out;
  std::vector<bool> used(plan.size(), false);
  bool region_start_seen = false;
  at::NoGradGuard no_grad;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    auto* parent = dynamic_cast<nn::Composite*>(item.value().get());
    for (const auto& child : item.value()->named_children()) {
      const std::string& name = child.key();
      const std::string full = item.key().empty() ? name : item.key() + "." + name;
      size_t k = 0;
      while (k < plan.size() && !matches(plan[k].name, full)) ++k;
      if (k == plan.size()) continue;
      used[k] = true;
      auto layer = std::dynamic_pointer_cast<nn::Layer>(child.value());
      if (!parent || !layer) throw std::invalid_argument(not_splittable(plan[k], full, child.value()->name()));
      if (is_sequence_style(plan[k].style)) {
        parent->replace(name, sequence_layer(layer, plan[k].style, group, options));
        region_start_seen |= plan[k].style == nn::ParallelStyle::SEQUENCE_START;
      } else if (auto* linear = dynamic_cast<nn::Linear*>(layer.get())) {
        const TPOptions& own = plan[k].vocabulary_head ? vocabulary : options;
        parent->replace(name, split_linear(*linear, plan[k], full, group, own, out));
      } else if (auto* table = dynamic_cast<nn::Embedding*>(layer.get())) {
        parent->replace(name, split_embedding(*table, plan[k], full, group, vocabulary, out));
        region_start_seen |= vocabulary.sequence_parallel();
      } else {
        throw std::invalid_argument(not_splittable(plan[k], full, layer->name()));
      }
    }
  }
  for (size_t k = 0; k < plan.size(); ++k) {
    if (!used[k]) {
      throw std::invalid_argument("parallelism_config.tp: layer_plan entry '" + plan[k].name +
                                  "' matches no module of the model");
    }
  }
  if (options.sequence_parallel() && !region_start_seen) {
    throw std::invalid_argument(
        "parallelism_config.tp.sequence_parallel: the plan splits no embedding rowwise and marks no sequence_start "
        "layer; the sequence-parallel region starts at the token embedding's output (the Llama family's default plan "
        "splits it) or at a sequence_start layer (GPT-2's plan marks its embedding dropout), so the plan must start it "
        "and split every layer from there up to the head");
  }
  return out;
}

}  // namespace composer::dist
