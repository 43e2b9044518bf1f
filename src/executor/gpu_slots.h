#pragma once
// The GPUs a local run may use, handed to trials first-come first-served.

#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace autotune::executor {

// "0-15", "0,1,2", "0-3,8-11": distinct device ids in the order given.
tl::expected<std::vector<int>, std::string> parseGpuList(std::string_view text);

// "0,1,2", as CUDA_VISIBLE_DEVICES wants it.
std::string deviceList(const std::vector<int>& gpus);

// "0-15" or "0-3,8": ranges for people to read.
std::string rangeList(const std::vector<int>& gpus);

class GpuSlots {
 public:
  explicit GpuSlots(std::vector<int> gpus);

  // `count` free GPUs, in the order the list gave them, or nothing when fewer are free.
  std::optional<std::vector<int>> acquire(int count);
  void release(const std::vector<int>& gpus);

  int total() const { return static_cast<int>(all_.size()); }
  int free() const { return static_cast<int>(free_.size()); }

 private:
  std::vector<int> all_;
  std::vector<int> free_;  // kept in the order of all_
};

}  // namespace autotune::executor
