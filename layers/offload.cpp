// The offload modes by name, and what each holds where and copies per step (offload.hpp).
#include "optimus/layers/offload.hpp"

#include <algorithm>

#include "optimus/core/error.hpp"

namespace optimus {

const char* name_of(Offload mode) {
  switch (mode) {
    case Offload::none: return "none";
    case Offload::optimizer: return "optimizer";
    case Offload::spill: return "spill";
    case Offload::spill_activations: return "spill+activations";
  }
  return "?";
}

std::vector<Offload> all_offload_modes() {
  return {Offload::none, Offload::optimizer, Offload::spill, Offload::spill_activations};
}

Offload parse_offload(const std::string& text) {
  for (Offload mode : all_offload_modes()) {
    if (text == name_of(mode)) return mode;
  }
  OPTIMUS_FAIL("an offload mode is none, optimizer, spill or spill+activations, not '", text, "'");
}

StateFootprint state_footprint(Spill spill, const std::optional<OptimizerOffload>& optimizer, const ModelShards& m) {
  const auto e = static_cast<std::uint64_t>(m.word);
  const auto block = static_cast<std::uint64_t>(m.block_parameters) * e;
  const auto blocks = static_cast<std::uint64_t>(m.blocks) * block;
  const bool spilled = spill != Spill::none;
  const std::uint64_t slots = spilled ? std::min<std::uint64_t>(static_cast<std::uint64_t>(m.blocks), 2) * block : 0;
  // What the device keeps for good: everything, or all but the spilled blocks.
  const std::int64_t kept = m.other_parameters + (spilled ? 0 : m.blocks * m.block_parameters);
  const std::uint64_t on_device = static_cast<std::uint64_t>(kept) * e;
  // The bf16 copies: of the blocks' weights (unless spilled) and of wte, which the head multiplies.
  const std::int64_t copied = (spilled ? 0 : m.blocks * m.block_weights) + m.wte;
  const std::uint64_t copies = static_cast<std::uint64_t>(copied) * static_cast<std::uint64_t>(m.copy_word);
  StateFootprint f;
  f.device = {.parameters = on_device + slots + copies,
              .gradients = on_device + slots + static_cast<std::uint64_t>(m.head_gradient) * e,
              .optimizer = 2 * on_device};
  if (spilled) f.host = {.parameters = blocks, .gradients = blocks, .optimizer = 2 * blocks};
  if (optimizer) {
    const std::uint64_t buffers = 6 * static_cast<std::uint64_t>(chunk_of(*optimizer, kept)) * e;
    const bool device_way = optimizer->update == OffloadUpdate::device;
    f.device.optimizer = device_way ? buffers : 0;
    f.host.optimizer += 2 * on_device + (device_way ? 0 : buffers);
  }
  return f;
}

TransferBytes step_transfers(Spill spill, const std::optional<OptimizerOffload>& optimizer, const ModelShards& m,
                             std::int64_t micro_batches, std::int64_t block_activations) {
  const bool spilled = spill != Spill::none;
  TransferBytes t;
  if (optimizer) {
    t += offload_step_transfers(optimizer->update,
                                m.other_parameters + (spilled ? 0 : m.blocks * m.block_parameters), m.word);
  }
  if (spilled) {
    t += spill_step_transfers(m.blocks, m.block_parameters, m.word, micro_batches,
                              spill == Spill::parameters_and_activations ? block_activations : 0);
  }
  return t;
}

Spill spill_of(Offload mode) {
  switch (mode) {
    case Offload::spill: return Spill::parameters;
    case Offload::spill_activations: return Spill::parameters_and_activations;
    case Offload::none:
    case Offload::optimizer: break;
  }
  return Spill::none;
}

}  // namespace optimus
