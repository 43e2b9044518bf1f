#include "executor/gpu_slots.h"

#include <algorithm>
#include <charconv>

namespace autotune::executor {
namespace {

std::optional<int> parseId(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

tl::expected<std::vector<int>, std::string> parseGpuList(std::string_view text) {
  std::vector<int> gpus;
  const auto invalid = [&](std::string_view part) {
    return tl::unexpected("\"" + std::string(part) +
                          "\" is not a GPU id or range (examples: 0-15, 0,1,2)");
  };
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const auto dash = part.find('-');
    const auto first = parseId(part.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parseId(part.substr(dash + 1));
    if (!first || !last || *last < *first) {
      return invalid(part);
    }
    for (int id = *first; id <= *last; ++id) {
      if (std::find(gpus.begin(), gpus.end(), id) != gpus.end()) {
        return tl::unexpected("GPU " + std::to_string(id) + " is listed twice");
      }
      gpus.push_back(id);
    }
  }
  if (gpus.empty()) {
    return tl::unexpected(std::string("the GPU list is empty"));
  }
  return gpus;
}

std::string deviceList(const std::vector<int>& gpus) {
  std::string list;
  for (const int id : gpus) {
    if (!list.empty()) {
      list += ',';
    }
    list += std::to_string(id);
  }
  return list;
}

std::string rangeList(const std::vector<int>& gpus) {
  std::string list;
  for (std::size_t i = 0; i < gpus.size();) {
    std::size_t last = i;
    while (last + 1 < gpus.size() && gpus[last + 1] == gpus[last] + 1) {
      ++last;
    }
    list += (list.empty() ? "" : ",") + std::to_string(gpus[i]);
    if (last > i) {
      list += "-" + std::to_string(gpus[last]);
    }
    i = last + 1;
  }
  return list;
}

GpuSlots::GpuSlots(std::vector<int> gpus) : all_(std::move(gpus)), free_(all_) {}

std::optional<std::vector<int>> GpuSlots::acquire(int count) {
  if (count <= 0 || count > free()) {
    return std::nullopt;
  }
  std::vector<int> taken(free_.begin(), free_.begin() + count);
  free_.erase(free_.begin(), free_.begin() + count);
  return taken;
}

void GpuSlots::release(const std::vector<int>& gpus) {
  for (const int id : gpus) {
    if (std::find(free_.begin(), free_.end(), id) == free_.end()) {
      free_.push_back(id);
    }
  }
  std::sort(free_.begin(), free_.end(), [&](int left, int right) {
    return std::find(all_.begin(), all_.end(), left) < std::find(all_.begin(), all_.end(), right);
  });
}

}  // namespace autotune::executor
