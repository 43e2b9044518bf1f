#include "k8s/client.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

#include "object/read.h"

namespace autotune::k8s {
namespace {

using object::text;

constexpr std::string_view kJsonContent = "application/json";

// JSON text parsed without the keys `omitted` names, wherever they appear; discarded when it is
// not JSON.
nlohmann::json parseOmitting(std::string_view text, const OmittedKeys& omitted) {
  if (omitted.empty()) {
    return nlohmann::json::parse(text, nullptr, false);
  }
  return nlohmann::json::parse(
      text,
      [&omitted](int /*depth*/, nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
        return event != nlohmann::json::parse_event_t::key ||
               std::ranges::find(omitted, parsed.get_ref<const std::string&>()) == omitted.end();
      },
      false);
}

// A request body as JSON. Objects carry text from outside (a trial's log in a status message);
// invalid UTF-8 in it is replaced rather than thrown on, so no object can fail to be sent.
std::string serialized(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string query(const std::vector<std::pair<std::string, std::string>>& parameters) {
  std::string text;
  for (const auto& [name, value] : parameters) {
    if (value.empty()) {
      continue;
    }
    text += (text.empty() ? "?" : "&") + name + "=" + encodeQueryValue(value);
  }
  return text;
}

std::string propagationName(Propagation propagation) {
  switch (propagation) {
    case Propagation::kForeground:
      return "Foreground";
    case Propagation::kOrphan:
      return "Orphan";
    case Propagation::kBackground:
      break;
  }
  return "Background";
}

std::string patchContentType(PatchType type) {
  switch (type) {
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";  // JSON is YAML
    case PatchType::kMerge:
      break;
  }
  return "application/merge-patch+json";
}

std::string nameOf(const nlohmann::json& object) {
  return object.value("metadata", nlohmann::json::object()).value("name", "");
}

}  // namespace

std::string encodeQueryValue(const std::string& value) {
  std::string encoded;
  for (const unsigned char c : value) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded.push_back(static_cast<char>(c));
    } else {
      std::array<char, 4> hex{};
      std::snprintf(hex.data(), hex.size(), "%%%02X", c);
      encoded += hex.data();
    }
  }
  return encoded;
}

std::string resourcePath(const Resource& resource, const std::string& ns, const std::string& name,
                         const std::string& subresource) {
  std::string path = resource.group.empty() ? "/api/" + resource.version
                                            : "/apis/" + resource.group + "/" + resource.version;
  if (resource.namespaced && !ns.empty()) {
    path += "/namespaces/" + ns;
  }
  path += "/" + resource.plural;
  if (!name.empty()) {
    path += "/" + name;
  }
  if (!subresource.empty()) {
    path += "/" + subresource;
  }
  return path;
}

Client Client::impersonating(std::string user) const {
  Client copy = *this;
  copy.impersonate_ = std::move(user);
  return copy;
}

Result<nlohmann::json> Client::call(const std::string& method, const std::string& target,
                                    const std::string& contentType, const std::string& body,
                                    const OmittedKeys& omitted) const {
  HttpRequest request{method, target, body, contentType, {}};
  if (impersonate_) {
    request.headers.emplace_back("Impersonate-User", *impersonate_);
  }
  auto backoff = policy_.initialBackoff;
  for (int retry = 0;; ++retry) {
    policy_.throttle();
    auto result = attempt(request, omitted);
    if (result || !result.error().retryable() || retry >= policy_.maxRetries) {
      return result;
    }
    const auto retryAfter = result.error().retryAfter;
    policy_.sleep(retryAfter ? std::chrono::duration_cast<std::chrono::milliseconds>(*retryAfter)
                             : backoff);
    backoff = std::min(backoff * 2, policy_.maxBackoff);
  }
}

Result<nlohmann::json> Client::attempt(const HttpRequest& request,
                                       const OmittedKeys& omitted) const {
  auto response = transport_->send(request);
  if (policy_.observe) {
    policy_.observe(request.method, response ? response->status : 0);
  }
  if (!response) {
    return tl::unexpected(transportError(response.error()));
  }
  if (response->status < 200 || response->status >= 300) {
    const auto retryAfter = response->headers.find("retry-after");
    return tl::unexpected(decodeError(response->status, response->body,
                                      retryAfter == response->headers.end()
                                          ? std::nullopt
                                          : std::optional<std::string_view>(retryAfter->second)));
  }
  nlohmann::json object = parseOmitting(response->body, omitted);
  if (object.is_discarded()) {
    return tl::unexpected(transportError("the server answered " + request.method + " " +
                                         request.target + " with a body that is not JSON"));
  }
  return object;
}

Result<nlohmann::json> Client::get(const Resource& resource, const std::string& ns,
                                   const std::string& name) const {
  return call("GET", resourcePath(resource, ns, name), "", "");
}

Result<nlohmann::json> Client::list(const Resource& resource, const std::string& ns,
                                    const ListOptions& options) const {
  const std::string target =
      resourcePath(resource, ns) +
      query({{"labelSelector", options.labelSelector},
             {"fieldSelector", options.fieldSelector},
             {"limit", options.limit > 0 ? std::to_string(options.limit) : ""},
             {"continue", options.continueToken},
             {"resourceVersion", options.resourceVersion}});
  return call("GET", target, "", "", options.omittedKeys);
}

Result<std::vector<nlohmann::json>> Client::listAll(const Resource& resource, const std::string& ns,
                                                    ListOptions options) const {
  std::vector<nlohmann::json> items;
  do {
    auto page = list(resource, ns, options);
    if (!page) {
      return tl::unexpected(page.error());
    }
    for (auto& item : (*page)["items"]) {
      items.push_back(std::move(item));
    }
    options.continueToken = page->value("metadata", nlohmann::json::object()).value("continue", "");
  } while (!options.continueToken.empty());
  return items;
}

Result<nlohmann::json> Client::create(const Resource& resource, const std::string& ns,
                                      const nlohmann::json& object) const {
  return call("POST", resourcePath(resource, ns), std::string(kJsonContent), serialized(object));
}

Result<nlohmann::json> Client::update(const Resource& resource, const std::string& ns,
                                      const nlohmann::json& object) const {
  return call("PUT", resourcePath(resource, ns, nameOf(object)), std::string(kJsonContent),
              serialized(object));
}

Result<nlohmann::json> Client::updateStatus(const Resource& resource, const std::string& ns,
                                            const nlohmann::json& object) const {
  return call("PUT", resourcePath(resource, ns, nameOf(object), "status"),
              std::string(kJsonContent), serialized(object));
}

Result<nlohmann::json> Client::patch(const Resource& resource, const std::string& ns,
                                     const std::string& name, PatchType type,
                                     const nlohmann::json& patch, const ApplyOptions& apply) const {
  std::string target = resourcePath(resource, ns, name);
  if (type == PatchType::kApply) {
    target += query({{"fieldManager", apply.fieldManager}, {"force", apply.force ? "true" : ""}});
  }
  return call("PATCH", target, patchContentType(type), serialized(patch));
}

Result<nlohmann::json> Client::remove(const Resource& resource, const std::string& ns,
                                      const std::string& name, Propagation propagation,
                                      std::optional<int> gracePeriodSeconds,
                                      const std::string& uid) const {
  nlohmann::json options = {{"kind", "DeleteOptions"},
                            {"apiVersion", "v1"},
                            {"propagationPolicy", propagationName(propagation)}};
  if (gracePeriodSeconds) {
    options["gracePeriodSeconds"] = *gracePeriodSeconds;
  }
  if (!uid.empty()) {
    options["preconditions"] = {{"uid", uid}};
  }
  return call("DELETE", resourcePath(resource, ns, name), std::string(kJsonContent),
              serialized(options));
}

Result<void> Client::watch(const Resource& resource, const std::string& ns,
                           const WatchOptions& options, const WatchHandler& onEvent) const {
  constexpr int kIdleMargin = 30;
  const std::string target = resourcePath(resource, ns) +
                             query({{"watch", "true"},
                                    {"allowWatchBookmarks", "true"},
                                    {"resourceVersion", options.resourceVersion},
                                    {"labelSelector", options.labelSelector},
                                    {"fieldSelector", options.fieldSelector},
                                    {"timeoutSeconds", std::to_string(options.timeoutSeconds)}});
  HttpRequest request{"GET", target, "", "", {}};
  if (impersonate_) {
    request.headers.emplace_back("Impersonate-User", *impersonate_);
  }
  std::optional<Error> failure;
  const auto handleLine = [&](std::string_view line) {
    nlohmann::json event = parseOmitting(line, options.omittedKeys);
    if (event.is_discarded() || !event.is_object()) {
      failure = transportError("a watch line is not JSON: " + std::string(line.substr(0, 200)));
      return false;
    }
    const std::string type = text(event, "type");
    if (type == "ERROR") {
      failure = decodeError(0, serialized(event["object"]));
      return false;
    }
    return onEvent({type, std::move(event["object"])});
  };
  const auto ended =
      transport_->stream(request, handleLine,
                         std::chrono::seconds(options.timeoutSeconds + kIdleMargin), options.stop);
  // A connection closed by our own stop is not a failed request.
  if (policy_.observe && (ended || !options.stop.stop_requested())) {
    policy_.observe("WATCH", ended ? ended->status : 0);
  }
  if (options.stop.stop_requested()) {
    return {};
  }
  if (!ended) {
    return tl::unexpected(transportError(ended.error()));
  }
  if (ended->status != 200) {
    return tl::unexpected(decodeError(ended->status, ended->body));
  }
  if (failure) {
    return tl::unexpected(*failure);
  }
  return {};
}

}  // namespace autotune::k8s
