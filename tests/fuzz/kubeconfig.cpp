// kubeconfig files of any content: loading one never throws, and either yields a server to talk
// to or an error that names the file.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/check.h"
#include "k8s/config.h"

namespace {

using autotune::fuzz::check;

// One file per fuzzing process, rewritten for each input.
const std::filesystem::path& kubeconfigPath() {
  static const std::filesystem::path path = [] {
    const auto directory =
        std::filesystem::temp_directory_path() / ("fuzz-kubeconfig-" + std::to_string(getpid()));
    std::filesystem::create_directories(directory);
    return directory / "config";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path& path = kubeconfigPath();
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  for (const char* context : {"", "ci"}) {
    const auto config = autotune::k8s::loadKubeconfig(path.string(), context);
    if (config) {
      check(!config->server.empty(), "a loaded kubeconfig names a server");
    } else {
      check(config.error().message.find(path.string()) != std::string::npos,
            "a kubeconfig error names the file");
    }
  }
  return 0;
}
