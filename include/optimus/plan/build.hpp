// The one builder of a GPT from a layout (layout.hpp): train_gpt, optimus-bench and the plan runner (run.hpp) all make
// their model here, so that a layout means the same model wherever it is run.
#pragma once

#include <memory>
#include <variant>

#include "optimus/model/gpt.hpp"
#include "optimus/plan/layout.hpp"
#include "optimus/plan/place.hpp"

namespace optimus::plan {

// This rank's stage of the GPT `config`, laid out as `layout` says, on `place` (Family::Place: the grid of
// Grid::create(world, q, pp), or the group of megatron::Group::pipeline_stage(world, pp, dp), placed where it computes
// and executing as its handle says): the layout's schedule, its blocks spilled as layout.offload says, and each block's
// recomputation (layout.recompute: one policy per block, or empty for none). Throws optimus::Error naming the values
// unless the layout's tensor parallelism is the family's and its tp, dp and pp are the place's.
template <class Family>
std::unique_ptr<Gpt<Family>> build_gpt(const typename Family::Place& place, const GptConfig& config,
                                       const Layout& layout);

extern template std::unique_ptr<Gpt<TwoD<float>>> build_gpt(const Grid&, const GptConfig&, const Layout&);
extern template std::unique_ptr<Gpt<TwoD<double>>> build_gpt(const Grid&, const GptConfig&, const Layout&);
extern template std::unique_ptr<Gpt<OneD<float>>> build_gpt(const megatron::Group&, const GptConfig&, const Layout&);
extern template std::unique_ptr<Gpt<OneD<double>>> build_gpt(const megatron::Group&, const GptConfig&, const Layout&);

// A GPT whose family the layout chose at run time: this rank's stage of Gpt2D<T> or Gpt1D<T>. Programs reach it with
// std::visit and a generic lambda, so that one code path serves both (each Gpt<Family> has the same members).
template <class T>
using AnyGpt = std::variant<std::unique_ptr<Gpt<TwoD<T>>>, std::unique_ptr<Gpt<OneD<T>>>>;

// build_gpt on the place's family (place.hpp): the one builder of a layout's model wherever the family is chosen at
// run time.
template <class T>
AnyGpt<T> build_any_gpt(const Place& place, const GptConfig& config, const Layout& layout);

extern template AnyGpt<float> build_any_gpt(const Place&, const GptConfig&, const Layout&);
extern template AnyGpt<double> build_any_gpt(const Place&, const GptConfig&, const Layout&);

}  // namespace optimus::plan
