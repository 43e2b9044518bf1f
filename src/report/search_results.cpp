#include "report/search_results.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "api/codec.h"
#include "api/labels.h"
#include "api/text.h"
#include "object/read.h"

namespace autotune::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The documents are the user's, of any shape.
using object::member;

std::optional<std::string> textOf(const json& object, std::string_view key) {
  const json& found = member(object, key);
  if (!found.is_string()) {
    return std::nullopt;
  }
  return found.get<std::string>();
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) {
    text += (text.empty() ? "" : "\n") + line;
  }
  return text;
}

// JSON as both results.json shapes are written; YAML for a ConfigMap printed with -o yaml.
tl::expected<json, std::string> parseDocument(std::string_view text, const std::string& source) {
  json document = json::parse(text, nullptr, false);
  if (!document.is_discarded()) {
    return document;
  }
  auto yaml = api::yamlToJson(text);
  if (!yaml) {
    return tl::unexpected(source + ": neither JSON nor YAML: " + api::format(yaml.error()));
  }
  return std::move(*yaml);
}

// One record as status.results holds it; the keys only the files add are not the API's.
tl::expected<api::TrialRecord, std::vector<std::string>> decodeRecord(json entry,
                                                                      const std::string& path) {
  if (!entry.is_object()) {
    return tl::unexpected(std::vector<std::string>{path + ": must be an object"});
  }
  entry.erase("launchIndex");
  entry.erase("configPatch");
  auto status = api::decodeStatus({{"results", json::array({std::move(entry)})}});
  if (!status) {
    constexpr std::string_view kDecodedPrefix = "status.results[0]";
    std::vector<std::string> errors;
    for (api::FieldError error : status.error()) {
      if (error.path.starts_with(kDecodedPrefix)) {
        error.path = path + error.path.substr(kDecodedPrefix.size());
      }
      errors.push_back(api::format(error));
    }
    return tl::unexpected(std::move(errors));
  }
  return std::move(status->results.front());
}

// The records of a list, each error as "SOURCE: PATH[i].field: reason".
tl::expected<std::vector<FinishedTrial>, std::string> decodeRecords(const json& list,
                                                                    const std::string& listPath,
                                                                    const std::string& source) {
  if (!list.is_array()) {
    return tl::unexpected(source + ": " + (listPath.empty() ? "the document" : listPath) +
                          ": must be a list of trial records");
  }
  std::vector<FinishedTrial> trials;
  std::vector<std::string> errors;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto record = decodeRecord(list[i], listPath + "[" + std::to_string(i) + "]");
    if (!record) {
      for (const auto& error : record.error()) {
        errors.push_back(source);
        errors.back().append(": ").append(error);
      }
      continue;
    }
    trials.push_back({std::move(*record), ""});
  }
  if (!errors.empty()) {
    return tl::unexpected(joined(errors));
  }
  return trials;
}

// A local run's results.json: {"job", "trials": [... each with its launchIndex], "model"}.
tl::expected<SearchResults, std::string> fromLocalRun(const json& document,
                                                      const std::string& source) {
  json trials = member(document, "trials");
  if (trials.is_array()) {
    // Written in launch order; sorted again so that a hand-edited file still reads in it.
    std::stable_sort(trials.begin(), trials.end(), [](const json& a, const json& b) {
      const auto index = [](const json& entry) {
        const json& launchIndex = member(entry, "launchIndex");
        return launchIndex.is_number() ? launchIndex.get<double>() : 0.0;
      };
      return index(a) < index(b);
    });
  }
  auto records = decodeRecords(trials, "trials", source);
  if (!records) {
    return tl::unexpected(records.error());
  }
  SearchResults results;
  results.jobName = textOf(document, "job").value_or("");
  results.trials = std::move(*records);
  if (const json& model = member(document, "model"); !model.is_null()) {
    auto status = api::decodeStatus({{"model", model}});
    if (!status) {
      api::FieldError error = status.error().front();
      error.path.erase(0, std::string_view("status.").size());
      return tl::unexpected(source + ": " + api::format(error));
    }
    results.model = status->model;
  }
  return results;
}

// The output ConfigMap: its data holds results.json and the files the report shows with it.
tl::expected<SearchResults, std::string> fromConfigMap(const json& configMap,
                                                       const std::string& source) {
  const json& data = member(configMap, "data");
  const auto resultsText = textOf(data, api::kOutputResultsFile);
  if (!resultsText) {
    return tl::unexpected(source +
                          ": data.results.json: is missing; not the output ConfigMap of "
                          "an AutotuneJob");
  }
  const json list = json::parse(*resultsText, nullptr, false);
  if (list.is_discarded()) {
    return tl::unexpected(source + ": data.results.json: is not valid JSON");
  }
  auto records = decodeRecords(list, "data.results.json", source);
  if (!records) {
    return tl::unexpected(records.error());
  }
  SearchResults results;
  results.trials = std::move(*records);
  results.jobName =
      textOf(member(member(configMap, "metadata"), "labels"), api::kJobLabel).value_or("");
  results.summary = textOf(data, api::kOutputSummaryFile);
  results.bestConfig = textOf(data, api::kOutputConfigFile);
  results.command = textOf(data, api::kOutputCommandFile);
  return results;
}

// What `autotune run` writes beside results.json fills in what the records leave out.
void addDirectoryFiles(const fs::path& directory, SearchResults& results) {
  const auto fill = [&](std::optional<std::string>& field, std::string_view name) {
    if (!field) {
      field = api::readText(directory / name);
    }
  };
  fill(results.summary, api::kOutputSummaryFile);
  fill(results.bestConfig, "ds_config_optimal.json");
  fill(results.command, "cmd_optimal.txt");
  for (auto& trial : results.trials) {
    // Trial names are file names here; anything else is not looked for.
    if (trial.record.name.find('/') != std::string::npos || !trial.gpus.empty()) {
      continue;
    }
    const auto text = api::readText(directory / "exps" / (trial.record.name + ".json"));
    const json experiment = json::parse(text.value_or(""), nullptr, false);
    trial.gpus = textOf(experiment, "gpus").value_or("");
  }
}

}  // namespace

tl::expected<SearchResults, std::string> parseResults(std::string_view text,
                                                      const std::string& source) {
  auto document = parseDocument(text, source);
  if (!document) {
    return tl::unexpected(document.error());
  }
  if (document->is_array()) {
    return decodeRecords(*document, "", source).map([](std::vector<FinishedTrial>&& trials) {
      SearchResults results;
      results.trials = std::move(trials);
      return results;
    });
  }
  if (!member(*document, "trials").is_null()) {
    return fromLocalRun(*document, source);
  }
  if (textOf(*document, "kind") == "ConfigMap") {
    return fromConfigMap(*document, source);
  }
  return tl::unexpected(source +
                        ": is none of a results.json of autotune run ({\"trials\": [...]}), the "
                        "results.json of an output ConfigMap (a list of records), or an output "
                        "ConfigMap");
}

tl::expected<SearchResults, std::string> loadResults(const fs::path& path) {
  std::error_code error;
  const bool directory = fs::is_directory(path, error);
  const fs::path file = directory ? path / api::kOutputResultsFile : path;
  const auto text = api::readText(file);
  if (!text) {
    return tl::unexpected(directory ? path.string() +
                                          ": holds no results.json; not a results directory of "
                                          "autotune run"
                                    : file.string() + ": cannot be read");
  }
  auto results = parseResults(*text, file.string());
  if (results && (directory || file.filename() == api::kOutputResultsFile)) {
    addDirectoryFiles(file.parent_path(), *results);
  }
  return results;
}

int countGpus(std::string_view devices) {
  int count = 0;
  while (!devices.empty()) {
    const auto comma = devices.find(',');
    const std::string_view item = devices.substr(0, comma);
    devices = comma == std::string_view::npos ? std::string_view() : devices.substr(comma + 1);
    const auto dash = item.find('-');
    int first = 0;
    int last = 0;
    const std::string_view low = item.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : item.substr(dash + 1);
    const auto parsedLow = std::from_chars(low.data(), low.data() + low.size(), first);
    const auto parsedHigh = std::from_chars(high.data(), high.data() + high.size(), last);
    if (parsedLow.ec != std::errc() || parsedLow.ptr != low.data() + low.size() ||
        parsedHigh.ec != std::errc() || parsedHigh.ptr != high.data() + high.size() ||
        last < first) {
      return 0;
    }
    count += last - first + 1;
  }
  return count;
}

}  // namespace autotune::report
