// train_gpt's persistence (persistence.hpp).
#include "persistence.hpp"

#include <span>
#include <vector>

namespace optimus::examples {

std::string shared_run_id(Communicator& world) {
  std::string id = world.rank() == 0 ? checkpoint::new_run_id() : std::string(16, ' ');
  std::vector<std::uint8_t> bytes(id.begin(), id.end());
  world.broadcast(std::span<std::uint8_t>(bytes), 0);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace optimus::examples
