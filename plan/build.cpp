// The GPT a layout describes (build.hpp).
#include "optimus/plan/build.hpp"

#include <type_traits>

#include "optimus/core/error.hpp"
#include "optimus/layers/offload.hpp"

namespace optimus::plan {

pipeline::Schedule schedule_of(const Layout& layout) {
  if (layout.pp == 1) return pipeline::one_stage(layout.micro_batches);
  return pipeline::make_schedule({.kind = layout.schedule, .stages = layout.pp, .micro_batches = layout.micro_batches,
                                  .chunks = layout.chunks});
}

template <class Family>
std::unique_ptr<Gpt<Family>> build_gpt(const typename Family::Place& place, const GptConfig& config,
                                       const Layout& layout) {
  constexpr bool two_d = std::is_same_v<Family, TwoD<typename Family::Value>>;
  const Grid& grid = Family::grid(place);
  const int tp = two_d ? grid.q() * grid.q() : Family::holders(place).size();
  OPTIMUS_CHECK((layout.tensor == TensorParallel::two_d) == two_d && layout.tp == tp && layout.dp == grid.dp() &&
                    layout.pp == grid.pp(),
                "build_gpt: the layout ", describe(layout), " is not the place's: ", two_d ? "2D" : "1D", " with ", tp,
                " ranks per stage, dp ", grid.dp(), ", pp ", grid.pp());
  OPTIMUS_CHECK(layout.recompute.empty() || static_cast<std::int64_t>(layout.recompute.size()) == config.layers,
                "build_gpt: ", layout.recompute.size(), " recomputation policies for ", config.layers, " blocks");
  auto model = std::make_unique<Gpt<Family>>(place, config, schedule_of(layout), spill_of(layout.offload));
  for (std::size_t k = 0; k < layout.recompute.size(); ++k) {
    model->set_recompute(static_cast<std::int64_t>(k), layout.recompute[k]);  // (each stage sets its own blocks')
  }
  return model;
}

template std::unique_ptr<Gpt<TwoD<float>>> build_gpt(const Grid&, const GptConfig&, const Layout&);
template std::unique_ptr<Gpt<TwoD<double>>> build_gpt(const Grid&, const GptConfig&, const Layout&);
template std::unique_ptr<Gpt<OneD<float>>> build_gpt(const megatron::Group&, const GptConfig&, const Layout&);
template std::unique_ptr<Gpt<OneD<double>>> build_gpt(const megatron::Group&, const GptConfig&, const Layout&);

}  // namespace optimus::plan
