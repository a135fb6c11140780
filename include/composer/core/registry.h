// Registry: the classes of one kind (algorithms, schedulers, callbacks, ...) by config name ("cosine_annealing") and
// Composer class name ("CosineAnnealingScheduler"), each built from string hyperparameters through its options'
// field list (core/fields.h). Each component folder keeps its kind's registry beside its classes (e.g.
// optim/registry.h); YAML configs, reprs in checkpoints and `composer-cpp list` read them, so a name, a default or a
// doc is written once.
#pragma once

#include "composer/core/fields.h"
#include "composer/core/hparams.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace composer {

/// What a registry lists about one entry.
struct RegisteredName {
  std::string name;        // config name, snake_case
  std::string class_name;  // Composer's class name
  std::string summary;     // one line: what it does
  /// The hyperparameters with their defaults and docs, from the options' field list.
  std::vector<FieldDoc> fields;
};

/// One entry: how to build a Product from hyperparameters and the Context a kind needs (an optimizer its parameters).
template <class Product, class... Context>
struct RegistryEntry : RegisteredName {
  std::function<std::shared_ptr<Product>(Hparams&, Context...)> make;
};

template <class Product, class... Context>
class Registry {
 public:
  using Entry = RegistryEntry<Product, Context...>;

  /// `kind` names one entry in errors ("scheduler"); entries are kept sorted by name.
  Registry(std::string kind, std::vector<Entry> entries) : kind_(std::move(kind)), entries_(std::move(entries)) {
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  }

  const std::string& kind() const { return kind_; }
  const std::vector<Entry>& entries() const { return entries_; }

  /// The entry for a config or class name, or nullptr.
  const Entry* find(const std::string& name) const {
    for (const auto& e : entries_)
      if (e.name == name || e.class_name == name) return &e;
    return nullptr;
  }

  /// The entry, or std::invalid_argument "unknown <kind> '<name>'; registered: a, b, ...".
  const Entry& require(const std::string& name) const {
    if (const Entry* e = find(name)) return *e;
    throw std::invalid_argument("unknown " + kind_ + " '" + name + "'; registered: " + names());
  }

  /// Builds `name` from `hparams`; errors name an unknown entry, an unknown key or a bad value as "<where>.<key>"
  /// (default: the entry's name).
  std::shared_ptr<Product> make(const std::string& name, const std::map<std::string, std::string>& hparams,
                                const std::string& where, Context... context) const {
    const Entry& e = require(name);
    Hparams h(hparams, where.empty() ? e.name : where);
    auto product = e.make(h, context...);
    h.check_all_used();
    return product;
  }

  /// Re-creates an entry from its repr, "Name(key=value, ...)"; std::invalid_argument names the repr on failure.
  std::shared_ptr<Product> make_from_repr(const std::string& repr, Context... context) const;

  std::vector<RegisteredName> listing() const { return {entries_.begin(), entries_.end()}; }

  std::string names() const {
    std::string out;
    for (const auto& e : entries_) out += (out.empty() ? "" : ", ") + e.name;
    return out;
  }

 private:
  std::string kind_;
  std::vector<Entry> entries_;
};

/// A repr split into its name and arguments: "Name(a=1, b='x', c=[1, 2])" -> {"Name", {a: 1, b: x, c: [1, 2]}}
/// (quotes around a value dropped; a bracketed list stays one value). Throws std::invalid_argument naming the repr.
std::pair<std::string, std::map<std::string, std::string>> parse_repr(const std::string& repr);

template <class Product, class... Context>
std::shared_ptr<Product> Registry<Product, Context...>::make_from_repr(const std::string& repr,
                                                                       Context... context) const {
  const auto [name, hparams] = parse_repr(repr);
  try {
    return make(name, hparams, "", context...);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(kind_ + " repr '" + repr + "': " + e.what());
  }
}

/// A class without hyperparameters (its entry lists no fields).
struct NoOptions {
  template <class Self, class Visit>
  static void for_each_field(Self&, Visit&&) {}
};

namespace detail {
/// Whether Fields has follow(context...): defaults that follow the context (a model's shapes follow the data).
template <class Fields, class Void, class... Context>
struct follows_context : std::false_type {};
template <class Fields, class... Context>
struct follows_context<Fields, std::void_t<decltype(std::declval<Fields&>().follow(std::declval<Context>()...))>,
                       Context...> : std::true_type {};
}  // namespace detail

/// The one way an entry is made. Its fields are `defaults`' field list (after defaults.follow(context...), when
/// Fields has it); `build(hparams, fields, context...)` makes the product from the fields read from the
/// hyperparameters (the hyperparameters are there to name a key in an error) and returns a shared_ptr<Product> or a
/// Product.
template <class Product, class... Context, class Fields, class Build>
RegistryEntry<Product, Context...> registry_entry(std::string name, std::string class_name, std::string summary,
                                                  Fields defaults, Build build) {
  RegistryEntry<Product, Context...> e;
  e.name = std::move(name);
  e.class_name = std::move(class_name);
  e.summary = std::move(summary);
  e.fields = describe_fields(defaults);
  e.make = [defaults = std::move(defaults), build = std::move(build)](Hparams& h,
                                                                      Context... context) -> std::shared_ptr<Product> {
    Fields fields = defaults;
    if constexpr (detail::follows_context<Fields, void, Context...>::value) fields.follow(context...);
    auto product = build(h, read_options(h, std::move(fields)), context...);
    if constexpr (std::is_convertible_v<decltype(product), std::shared_ptr<Product>>) {
      return product;
    } else {
      return std::make_shared<Product>(std::move(product));
    }
  };
  return e;
}

/// The entry for class T constructed from its Options (T(options)), or T() for NoOptions.
template <class Product, class T, class Options, class... Context>
RegistryEntry<Product, Context...> registry_entry(std::string name, std::string class_name, std::string summary) {
  return registry_entry<Product, Context...>(
      std::move(name), std::move(class_name), std::move(summary), Options(),
      [](Hparams&, const Options& options, Context...) -> std::shared_ptr<Product> {
        if constexpr (std::is_same_v<Options, NoOptions>) {
          return std::make_shared<T>();
        } else {
          return std::make_shared<T>(options);
        }
      });
}

}  // namespace composer
