// The two layer families the GPT (model/gpt.hpp's Gpt<Family>) is built from: the 2D layers on each stage's q x q grid,
// and the 1D (Megatron) baseline's on each stage's tensor-parallel group. A family names its layers, what they are
// built on (Place: a Grid made by Grid::create(world, q, pp), or a Group made by megatron::Group::pipeline_stage), the
// grid its activations live on (which also gives the stage, its pipe() to the other stages and the replicas), the ranks
// that hold a stage's tensors, and the calls in which the two differ.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "optimus/layers/block.hpp"
#include "optimus/layers/embedding.hpp"
#include "optimus/layers/lm_head.hpp"
#include "optimus/layers/megatron/block.hpp"
#include "optimus/layers/megatron/embedding.hpp"
#include "optimus/layers/megatron/lm_head.hpp"

namespace optimus {

template <class T>
struct TwoD {
  using Value = T;
  using Place = Grid;
  using Embedding = Embedding2D<T>;
  using Block = TransformerBlock2D<T>;
  using Head = LmHead2D<T>;
  static constexpr const char* name = "Gpt2D";
  static constexpr bool one_d = false;

  static const Grid& grid(const Grid& place) { return place; }
  static Communicator& holders(const Grid& place) { return place.grid(); }
  static void validate(const GptConfig& config, const Grid& place) { validate_for_grid(config, place.q()); }
  static void mark_replicated(std::vector<ParameterRef<T>>&, std::size_t, const Grid&) {}  // 2D tensors are split
};

template <class T>
struct OneD {
  using Value = T;
  using Place = megatron::Group;
  using Embedding = megatron::Embedding1D<T>;
  using Block = megatron::TransformerBlock1D<T>;
  using Head = megatron::LmHead1D<T>;
  static constexpr const char* name = "Gpt1D";
  static constexpr bool one_d = true;

  // The group's q = 1 grid: activations [N, h] replicated on the group's ranks; stage() and pipe() the pipeline's.
  static const Grid& grid(const megatron::Group& place) { return place.local(); }
  static Communicator& holders(const megatron::Group& place) { return place.tp(); }
  static void validate(const GptConfig& config, const megatron::Group& place) {
    validate_for_group(config, place.size());
  }
  // ln_f on the one-rank grid: every rank of the group holds it whole.
  static void mark_replicated(std::vector<ParameterRef<T>>& params, std::size_t from, const megatron::Group& place) {
    megatron::mark_replicated(params, from, place);
  }
};

// The family whose layers are built on `Place` (a Grid: the 2D layers; a megatron::Group: the 1D baseline's), for code
// that holds a place chosen at run time (plan::Place).
template <class Place, class T>
using FamilyOn = std::conditional_t<std::is_same_v<Place, Grid>, TwoD<T>, OneD<T>>;

}  // namespace optimus
