#include "api/shell_command.h"

#include <algorithm>
#include <array>

namespace autotune::api {
namespace {

constexpr std::array<std::string_view, 6> kShells = {"sh", "bash", "dash", "ash", "ksh", "zsh"};

std::string_view baseName(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool isShell(std::string_view word) {
  return std::ranges::find(kShells, baseName(word)) != kShells.end();
}

// A group of short options (-c, -ec, -xc): not "--", not a long option.
bool isShortOptions(std::string_view word) {
  return word.size() > 1 && (word[0] == '-' || word[0] == '+') && word[1] != '-';
}

bool isWordCharacter(char c) { return c != ' ' && c != '\t' && c != '\n' && c != '"' && c != '\''; }

}  // namespace

std::optional<std::size_t> shellScriptIndex(const std::vector<std::string>& argv) {
  std::size_t at = 0;
  if (!argv.empty() && baseName(argv[0]) == "env") {
    // env's own options and NAME=VALUE settings come before the program; -u NAME and -C DIR
    // take the next word.
    for (at = 1;
         at < argv.size() && (argv[at].starts_with('-') || argv[at].find('=') != std::string::npos);
         ++at) {
      if (argv[at] == "-u" || argv[at] == "-C" || argv[at] == "--unset" || argv[at] == "--chdir") {
        ++at;
      }
    }
  }
  if (at >= argv.size() || !isShell(argv[at])) {
    return std::nullopt;
  }
  bool command = false;
  std::size_t next = at + 1;
  while (next < argv.size() && isShortOptions(argv[next])) {
    const std::string_view options = argv[next];
    if (options == "-o" || options == "+o") {
      next += 2;  // -o pipefail: an option's name follows
      continue;
    }
    command = command || (options[0] == '-' && options.find('c') != std::string_view::npos);
    ++next;
  }
  if (next < argv.size() && argv[next] == "--") {
    ++next;
  }
  if (!command || next >= argv.size()) {
    return std::nullopt;
  }
  return next;
}

bool forwardsArguments(std::string_view script) {
  constexpr std::array<std::string_view, 4> kAllArguments = {"$@", "${@}", "$*", "${*}"};
  return std::ranges::any_of(kAllArguments, [&](std::string_view all) {
    return script.find(all) != std::string_view::npos;
  });
}

bool setsFlag(std::string_view script, std::string_view flag) {
  for (std::size_t at = script.find(flag); at != std::string_view::npos;
       at = script.find(flag, at + 1)) {
    const bool starts = at == 0 || !isWordCharacter(script[at - 1]);
    const std::size_t end = at + flag.size();
    const bool ends = end == script.size() || !isWordCharacter(script[end]) || script[end] == '=';
    if (starts && ends) {
      return true;
    }
  }
  return false;
}

}  // namespace autotune::api
