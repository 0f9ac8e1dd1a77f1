// Fuzz target: command lines (arguments separated by NUL bytes) against train_gpt's option table and every getter.
#include <string>
#include <vector>

#include "program_options.hpp"
#include "optimus/programs/cli.hpp"
#include "optimus/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"train_gpt"};
  std::string current;
  for (std::size_t k = 0; k < size; ++k) {
    if (data[k] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[k]));
    }
  }
  args.push_back(current);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    const optimus::cli::Options o(static_cast<int>(argv.size()), argv.data(), 1,
                                  optimus::apps::train_gpt_options());
    for (const optimus::cli::Spec& s : o.table()) {
      switch (s.kind) {
        case optimus::cli::Kind::integer: o.integer(s.name, 1); break;
        case optimus::cli::Kind::real: o.real(s.name, 1); break;
        case optimus::cli::Kind::bytes: o.bytes(s.name, 1); break;
        case optimus::cli::Kind::input_files: o.list(s.name, "x"); break;
        default: o.text(s.name, ""); break;
      }
    }
  } catch (const optimus::cli::HelpRequested&) {
  } catch (const optimus::Error&) {
  }
  return 0;
}
