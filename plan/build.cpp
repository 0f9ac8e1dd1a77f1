// The GPT a layout describes (build.hpp).
#include "optimus/plan/build.hpp"

#include "optimus/core/error.hpp"
#include "optimus/layers/offload.hpp"

namespace optimus::plan {

template <class Family>
std::unique_ptr<Gpt<Family>> build_gpt(const typename Family::Place& place, const GptConfig& config,
                                       const Layout& layout) {
  const Grid& grid = Family::grid(place);
  const int tp = Family::holders(place).size();  // the ranks that hold a stage's tensors: q^2, or p
  OPTIMUS_CHECK((layout.tensor == TensorParallel::one_d) == Family::one_d && layout.tp == tp &&
                    layout.dp == grid.dp() && layout.pp == grid.pp(),
                "build_gpt: the layout ", describe(layout), " is not the place's: ", Family::one_d ? "1D" : "2D",
                " with ", tp, " ranks per stage, dp ", grid.dp(), ", pp ", grid.pp());
  OPTIMUS_CHECK(layout.recompute.empty() || static_cast<std::int64_t>(layout.recompute.size()) == config.layers,
                "build_gpt: ", layout.recompute.size(), " recomputation policies for ", config.layers, " blocks");
  auto model = std::make_unique<Gpt<Family>>(place, config, schedule_of(layout), spill_of(layout.offload));
  for (std::size_t k = 0; k < layout.recompute.size(); ++k) {
    model->set_recompute(static_cast<std::int64_t>(k), layout.recompute[k]);  // (each stage sets its own blocks')
  }
  return model;
}

// The family of each place: the 2D layers on a grid, the 1D baseline's on a group.
template <class T>
struct BuildOn {
  const GptConfig& config;
  const Layout& layout;
  AnyGpt<T> operator()(const Grid& grid) const { return build_gpt<TwoD<T>>(grid, config, layout); }
  AnyGpt<T> operator()(const megatron::Group& group) const { return build_gpt<OneD<T>>(group, config, layout); }
};

template <class T>
AnyGpt<T> build_any_gpt(const Place& place, const GptConfig& config, const Layout& layout) {
  return place.visit(BuildOn<T>{.config = config, .layout = layout});
}

template std::unique_ptr<Gpt<TwoD<float>>> build_gpt(const Grid&, const GptConfig&, const Layout&);
template std::unique_ptr<Gpt<TwoD<double>>> build_gpt(const Grid&, const GptConfig&, const Layout&);
template std::unique_ptr<Gpt<OneD<float>>> build_gpt(const megatron::Group&, const GptConfig&, const Layout&);
template std::unique_ptr<Gpt<OneD<double>>> build_gpt(const megatron::Group&, const GptConfig&, const Layout&);
template AnyGpt<float> build_any_gpt(const Place&, const GptConfig&, const Layout&);
template AnyGpt<double> build_any_gpt(const Place&, const GptConfig&, const Layout&);

}  // namespace optimus::plan
